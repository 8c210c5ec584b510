import { access } from 'node:fs/promises';
import { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import * as nodePty from 'node-pty';
import type { ShellOptions, ShellStream } from '../../../jobs/backend.ts';
import { programPath } from '../programs.ts';
import type { ContainerRoot } from '../runtime.ts';
import { containerCapabilities } from '../sandbox.ts';
import { enterContainerArgv } from '../shell-entry.ts';
import { dropPrivileges, rootView } from './container-command.ts';
import type { ContainerHandle } from './container-handle.ts';
import { type PodContext, type PodRecord, procsFiles } from './context.ts';
import { HOST_PATH, passedToShell } from './environment.ts';
import { commandProcess, processEnvironment } from './proc.ts';

/** The first of these the image has, as UCloud (and the Kubernetes backend) chooses; else sh. */
const SHELLS = ['/bin/bash', '/usr/bin/bash', '/bin/zsh', '/usr/bin/zsh', '/bin/fish', '/usr/bin/fish'];

/**
 * An interactive shell (a pty) in the pod's last started container, as its user: confined as the
 * container's command is when sandboxed, in the pod's cgroups, with the container's variables
 * that are safe for the root programs it starts through.
 */
export async function openShell(
  context: PodContext,
  record: PodRecord,
  last: ContainerHandle | undefined,
  options: ShellOptions,
): Promise<ShellStream> {
  if (!last) throw new Error(`pod ${record.spec.name} has no container to open a shell in`);
  const spec = last.spec;
  let argv: string[];
  let containerEnv = spec.env;
  if (context.sandbox.kind === 'none') {
    argv = [...dropPrivileges(context, spec), '/bin/sh'];
  } else {
    const target = await containerProcess(last);
    // The container's own (a recovered container's record does not keep it).
    containerEnv = await processEnvironment(target);
    // Confined as the container's command is: its namespaces, user, capabilities and seccomp.
    argv = enterContainerArgv(target, spec, context.sandbox.seccomp, containerCapabilities(spec.uid), [
      await shellIn(context, spec.root),
    ]);
  }
  // The shell starts through root's programs on the host: none of the variables that change them.
  const env: Record<string, string> = { TERM: 'xterm-256color' };
  for (const [name, value] of Object.entries(containerEnv)) {
    if (passedToShell(name)) env[name] = value;
  }
  // It joins the pod's cgroups, as the supervisor does, then becomes the command.
  const pty = nodePty.spawn(
    '/bin/sh',
    [programPath('join-cgroups.sh'), procsFiles(record.cgroups).join(':'), ...argv],
    {
      name: env.TERM,
      cols: options.cols,
      rows: options.rows,
      cwd: context.sandbox.kind === 'none' ? (spec.workingDir ?? '/') : '/',
      env: { ...env, PATH: env.PATH ?? HOST_PATH },
      encoding: null,
    },
  );
  return ptyStream(pty);
}

/** The process of a running container a shell joins, once bubblewrap has set the container up. */
async function containerProcess(container: ContainerHandle): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    if (container.ended || container.pid === null)
      throw new Error(`container ${container.spec.name} has ended`);
    const pid = await commandProcess(container.pid);
    if (pid !== null) return pid;
    await sleep(20);
  }
  throw new Error(`container ${container.spec.name} has no running process`);
}

async function shellIn(context: PodContext, root: ContainerRoot): Promise<string> {
  const view = await rootView(context, root, null);
  for (const shell of SHELLS) {
    const path = view.hostPath(shell);
    if (path === null) continue;
    try {
      await access(path);
      return shell;
    } catch {}
  }
  return '/bin/sh';
}

function ptyStream(pty: nodePty.IPty): ShellStream {
  const stream = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, callback) {
      pty.write(chunk);
      callback();
    },
    final(callback) {
      pty.kill();
      callback();
    },
    destroy(error, callback) {
      pty.kill();
      callback(error);
    },
  });
  pty.onData((data) => stream.push(data));
  const exitCode = new Promise<number>((resolve) =>
    pty.onExit(({ exitCode, signal }) => {
      stream.push(null);
      resolve(signal ? 128 + signal : exitCode);
    }),
  );
  return Object.assign(stream, { resize: (o: ShellOptions) => pty.resize(o.cols, o.rows), exitCode });
}
