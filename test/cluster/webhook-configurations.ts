/**
 * Prints Volcano's admission webhook configurations, as its installer has them, registered by
 * URL instead of by Service: the cluster's webhook-manager runs on loopback, not in a pod.
 *   node test/cluster/webhook-configurations.ts INSTALLER.yaml https://127.0.0.1:PORT
 * (scripts/cluster.sh reads the installer from the Volcano module in Go's module cache.)
 */
import { readFileSync } from 'node:fs';
import { parseAllDocuments, stringify } from 'yaml';

interface Webhook {
  clientConfig: { service?: { path?: string }; url?: string };
}

export function webhookConfigurationsByUrl(installer: string, base: string): string {
  const kinds = new Set(['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']);
  const out: string[] = [];
  for (const doc of parseAllDocuments(installer)) {
    const object = doc.toJS() as { kind?: string; webhooks?: Webhook[] } | null;
    if (!object?.kind || !kinds.has(object.kind)) continue;
    for (const hook of object.webhooks ?? []) {
      const path = hook.clientConfig.service?.path;
      if (path === undefined) throw new Error(`a webhook of ${object.kind} has no service path`);
      hook.clientConfig = { url: `${base}${path}` };
    }
    out.push(stringify(object));
  }
  if (out.length === 0) throw new Error('the installer holds no webhook configuration');
  return out.join('---\n');
}

if (import.meta.main) {
  const [installer, base] = process.argv.slice(2);
  if (!installer || !base) throw new Error('usage: webhook-configurations.ts INSTALLER.yaml BASE_URL');
  process.stdout.write(webhookConfigurationsByUrl(readFileSync(installer, 'utf8'), base));
}
