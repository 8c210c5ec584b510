import { ownerDrive } from '../model/owner.ts';
import { addVolume, mount, userContainer } from './builder.ts';
import type { JobPlugin, PreparedJob } from './plugin.ts';

const STORAGE_VOLUME = 'storage';

/** `<owner drive>/Jobs/<app title>/<job id>`: where the job works and its output stays. */
export function jobFolder(job: PreparedJob): string {
  const cleaned = job.application.metadata.title.replace(/[/\\]/g, '-').trim();
  // A title of "." or ".." would lead out of the Jobs folder; the name is always a plain segment.
  const title = cleaned === '' || /^\.+$/.test(cleaned) ? job.application.metadata.name : cleaned;
  return `${ownerDrive(job.owner)}/Jobs/${title}/${job.id}`;
}

/** The parameters as run, saved beside the output so that a job can be understood and repeated. */
export function jobParametersJson(job: PreparedJob): string {
  const exported = {
    jobId: job.id,
    createdAt: job.createdAt,
    owner: job.owner,
    application: { name: job.application.metadata.name, version: job.application.metadata.version },
    request: job.specification,
    resolvedParameters: job.parameters.values,
    machineType: job.product,
    replicas: job.replicas,
  };
  return `${JSON.stringify(exported, null, 2)}\n`;
}

/**
 * FileMount: nothing is copied. The job folder is mounted read-write at `/work`, every input file
 * or folder at `/work/<name>` with its readOnly flag, all from the one storage volume claim by
 * sub-path. The job folder and `JobParameters.json` are created, and the folder is reported as the
 * job's output folder.
 */
export const fileMountPlugin: JobPlugin = {
  name: 'FileMount',
  async onCreate(ctx, job, build) {
    const folder = jobFolder(job);
    const { storageClaim, storageSubPath } = ctx.config.kubernetes;
    const subPath = (path: string) => (storageSubPath ? `${storageSubPath}${path}` : path.slice(1));

    addVolume(build, { name: STORAGE_VOLUME, persistentVolumeClaim: { claimName: storageClaim } });
    const container = userContainer(build);
    mount(container, { name: STORAGE_VOLUME, mountPath: '/work', subPath: subPath(folder) });
    for (const file of job.parameters.files) {
      mount(container, {
        name: STORAGE_VOLUME,
        mountPath: file.mountPath,
        subPath: subPath(file.path),
        readOnly: file.readOnly,
      });
    }
    build.outputFolder = folder;

    if (ctx.storage?.makeFolderWith) {
      await ctx.storage.makeFolderWith(folder, [
        { name: 'JobParameters.json', content: jobParametersJson(job) },
      ]);
    } else if (ctx.storage) {
      await ctx.storage.ensureFolder(folder);
      await ctx.storage.writeFile(`${folder}/JobParameters.json`, jobParametersJson(job));
    }
  },
};
