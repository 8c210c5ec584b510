import { addVolume, mount, userContainer } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/** SharedMemory: `/dev/shm` as a memory-backed volume as large as the job's memory (1 GiB without one). */
export const sharedMemoryPlugin: JobPlugin = {
  name: 'SharedMemory',
  onCreate(_ctx, job, build) {
    addVolume(build, {
      name: 'shm',
      emptyDir: { medium: 'Memory', sizeLimit: `${job.product.memoryInGigs || 1}Gi` },
    });
    mount(userContainer(build), { name: 'shm', mountPath: '/dev/shm' });
  },
};
