import { literal, renderCommand, renderEnvironment } from '../catalog/invocation.ts';
import { setEnv, userContainer } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/**
 * Parameter: the container's command is the application's invocation rendered with the job's
 * values (an argv list, no shell); its environment comes from the `environment` map, plus
 * `UCLOUD_OPEN_WITH_FILE` for a job opened on a file.
 */
export const parameterPlugin: JobPlugin = {
  name: 'Parameter',
  onCreate(ctx, job, build) {
    const licenseAddress = (id: string) => {
      const server = ctx.config.licenseServers.find((s) => s.id === id);
      return server && `${server.address}:${server.port}${server.license ? `/${server.license}` : ''}`;
    };
    const values = job.parameters.values;
    const container = userContainer(build);
    container.command = renderCommand(job.application, values, { licenseAddress });
    for (const [name, value] of Object.entries(
      renderEnvironment(job.application, values, { licenseAddress }),
    )) {
      setEnv(container, name, value);
    }
    if (job.parameters.openedFile !== undefined)
      setEnv(container, 'UCLOUD_OPEN_WITH_FILE', literal(job.parameters.openedFile));
  },
};
