import { licenseAddressIn, literal, renderCommand, renderEnvironment } from '../catalog/invocation.ts';
import { jinjaCommand, jinjaTemplate } from '../catalog/jinja-script.ts';
import { setEnv, userContainer } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/**
 * Parameter: the container's command is the application's invocation rendered with the job's
 * values (an argv list, no shell; for an `application: v2` Jinja template, bash running the
 * script rendered for each rank); its environment comes from the `environment` map, plus
 * `UCLOUD_OPEN_WITH_FILE` for a job opened on a file.
 */
export const parameterPlugin: JobPlugin = {
  name: 'Parameter',
  onCreate(ctx, job, build) {
    const licenseAddress = licenseAddressIn(ctx.config.licenseServers);
    const values = job.parameters.values;
    const container = userContainer(build);
    const template = jinjaTemplate(job.application);
    container.command =
      template === undefined
        ? renderCommand(job.application, values, { licenseAddress })
        : jinjaCommand(template, { ...job, values }, { licenseAddress });
    for (const [name, value] of Object.entries(
      renderEnvironment(job.application, values, { licenseAddress }),
    )) {
      setEnv(container, name, value);
    }
    if (job.parameters.openedFile !== undefined)
      setEnv(container, 'UCLOUD_OPEN_WITH_FILE', literal(job.parameters.openedFile));
  },
};
