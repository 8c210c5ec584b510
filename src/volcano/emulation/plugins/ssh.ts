import { generateKeyPair, type KeyObject } from 'node:crypto';
import type { VolcanoJob } from '../../api/types.ts';
import { SSH_DEFAULT_KEY_PATH, type SshPluginOptions, sshConfig, sshPluginOptions } from '../conventions.ts';
import type { PluginBuilder, PluginFile, SshKeyPair } from './plugin.ts';

/**
 * The ssh plugin: one RSA key pair per job (unless the job brings its own), given to every pod
 * with `authorized_keys` and an ssh `config` that names every host of the job.
 */
export const sshPlugin: PluginBuilder = (args) => {
  const options = sshPluginOptions(args);
  return {
    name: 'ssh',
    async onJobAdd() {
      if (options.privateKey !== undefined && options.publicKey !== undefined) {
        return { ssh: { privateKey: options.privateKey, publicKey: options.publicKey } };
      }
      return { ssh: await rsaKeyPair() };
    },
    onPodCreate(pod, job, state) {
      if (state.ssh) pod.files.push(...sshFiles(job, options, state.ssh));
    },
  };
};

function sshFiles(job: VolcanoJob, options: SshPluginOptions, keys: SshKeyPair): PluginFile[] {
  // Volcano makes the keys readable by all when they go elsewhere than root's folder (non-root users).
  const mode = options.keyFilePath === SSH_DEFAULT_KEY_PATH ? 0o600 : 0o644;
  const dir = options.keyFilePath.replace(/\/+$/, '');
  return [
    { path: `${dir}/id_rsa`, content: keys.privateKey, mode },
    { path: `${dir}/id_rsa.pub`, content: keys.publicKey, mode },
    { path: `${dir}/authorized_keys`, content: keys.publicKey, mode },
    { path: `${dir}/config`, content: sshConfig(job, options.port), mode },
  ];
}

/** A 2048-bit RSA key as the ssh plugin makes it: PKCS#1 PEM, and `ssh-rsa <base64>\n`. */
async function rsaKeyPair(): Promise<SshKeyPair> {
  const pair = await new Promise<{ privateKey: KeyObject; publicKey: KeyObject }>((resolve, reject) =>
    generateKeyPair('rsa', { modulusLength: 2048 }, (err, publicKey, privateKey) =>
      err ? reject(err) : resolve({ privateKey, publicKey }),
    ),
  );
  const jwk = pair.publicKey.export({ format: 'jwk' });
  return {
    privateKey: pair.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
    publicKey: opensshRsa(jwk.e ?? '', jwk.n ?? ''),
  };
}

/** The OpenSSH wire encoding of an RSA public key: string "ssh-rsa", mpint e, mpint n. */
function opensshRsa(e64: string, n64: string): string {
  const mpint = (b64url: string) => {
    let bytes = Buffer.from(b64url, 'base64url');
    if ((bytes[0] ?? 0) & 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
    return bytes;
  };
  const field = (b: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(b.length);
    return Buffer.concat([length, b]);
  };
  const blob = Buffer.concat([field(Buffer.from('ssh-rsa')), field(mpint(e64)), field(mpint(n64))]);
  return `ssh-rsa ${blob.toString('base64')}\n`;
}
