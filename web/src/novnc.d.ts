// The part of noVNC's RFB class the desktop uses (the package ships no types).
declare module '@novnc/novnc' {
  export default class RFB extends EventTarget {
    constructor(target: HTMLElement, url: string, options?: { wsProtocols?: string[] });
    scaleViewport: boolean;
    sendCredentials(credentials: { password: string }): void;
    disconnect(): void;
  }
}
