import { VNC_PORT_ANNOTATION, WEB_PORT_ANNOTATION } from '../volcano/labels.ts';
import { annotateJob, userContainer } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/**
 * Proxy: declares the job's web or VNC port, on the container and on the job, so that the session
 * proxy can register one route per rank when the job starts, and find them again after a restart.
 */
export const proxyPlugin: JobPlugin = {
  name: 'Proxy',
  onCreate(_ctx, job, build) {
    const { web, vnc } = job.application.invocation;
    const container = userContainer(build);
    if (web) {
      container.ports = [
        ...(container.ports ?? []),
        { name: 'web', containerPort: web.port, protocol: 'TCP' },
      ];
      annotateJob(build, WEB_PORT_ANNOTATION, String(web.port));
    }
    if (vnc) {
      container.ports = [
        ...(container.ports ?? []),
        { name: 'vnc', containerPort: vnc.port, protocol: 'TCP' },
      ];
      annotateJob(build, VNC_PORT_ANNOTATION, String(vnc.port));
    }
  },
};
