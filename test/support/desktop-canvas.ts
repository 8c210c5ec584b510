/**
 * What a test or benchmark asks of noVNC's canvas on the desktop page (/sessions/vnc). The
 * functions run in the page: Playwright sends them there as text, so each stands on its own.
 */

interface Canvas {
  width: number;
  height: number;
  getContext(
    kind: '2d',
  ): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } } | null;
}
/** The page's document, as the functions run in the page reach it (each on its own: they are sent there as text). */
export type PageGlobal = { document: { querySelector(selector: string): Canvas | null } };

/**
 * In the page: whether the top of the noVNC canvas holds a bar (XFCE's panel): one colour over
 * most of a strip along the top, different from the middle of the screen.
 */
export function panelDrawn(): boolean {
  const canvas = (globalThis as unknown as PageGlobal).document.querySelector('#screen canvas');
  if (!canvas || canvas.width < 200 || canvas.height < 200) return false;
  const context = canvas.getContext('2d');
  if (!context) return false;
  const commonest = (x: number, y: number, w: number, h: number) => {
    const data = context.getImageData(x, y, w, h).data;
    const counts = new Map<number, number>();
    for (let i = 0; i < data.length; i += 4) {
      const colour = (data[i]! << 16) | (data[i + 1]! << 8) | data[i + 2]!;
      counts.set(colour, (counts.get(colour) ?? 0) + 1);
    }
    const [colour, count] = [...counts].reduce((a, b) => (b[1] > a[1] ? b : a));
    return { colour, share: count / (data.length / 4) };
  };
  const strip = commonest(0, 2, canvas.width, 8);
  const middle = commonest(
    Math.floor(canvas.width / 4),
    Math.floor(canvas.height / 3),
    Math.floor(canvas.width / 2),
    20,
  );
  return strip.share > 0.6 && strip.colour !== middle.colour;
}
