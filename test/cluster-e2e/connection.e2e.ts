/**
 * ucompute's connection to the real API server (src/backends/kubernetes/connection.ts), over TLS
 * with the CA and token of ucompute.kubeconfig.
 */
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { join } from 'node:path';
import { test } from 'node:test';
import { connect } from '../../src/backends/kubernetes/connection.ts';
import { resolveKubernetesSettings } from '../../src/backends/kubernetes/settings.ts';
import { CLUSTER_DIR, skip } from './cluster.ts';

test('requests one after the other share one TLS connection (client-node alone opens one per request)', {
  skip,
}, async (t) => {
  const conn = connect(resolveKubernetesSettings({ kubeconfig: join(CLUSTER_DIR, 'ucompute.kubeconfig') }));
  let connections = 0;
  const counted = () => {
    connections++;
  };
  subscribe('undici:client:connected', counted);
  t.after(() => unsubscribe('undici:client:connected', counted));
  for (let i = 0; i < 10; i++) await conn.objects.list('v1', 'Pod', 'ucompute');
  assert.equal(connections, 1);
});
