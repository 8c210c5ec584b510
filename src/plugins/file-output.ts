import { OUTPUT_FOLDER_ANNOTATION } from '../volcano/labels.ts';
import { annotateJob } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/**
 * FileOutput: records on the job where its logs must be saved at the end, so that the backend
 * that ends it (possibly after a restart of ucompute) knows without asking the store.
 */
export const fileOutputPlugin: JobPlugin = {
  name: 'FileOutput',
  onCreate(_ctx, _job, build) {
    if (build.outputFolder !== undefined) annotateJob(build, OUTPUT_FOLDER_ANNOTATION, build.outputFolder);
  },
};
