import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveSecurityPolicy } from '../src/model/config.ts';
import { ValidationError } from '../src/model/errors.ts';
import { readManifest } from '../src/volcano/emulation/manifest.ts';

/** Probes in a manifest: honoured when the local prober can, refused naming the field when not. */

const manifest = (container: Record<string, unknown>, init?: Record<string, unknown>) => [
  {
    apiVersion: 'batch.volcano.sh/v1alpha1',
    kind: 'Job',
    metadata: { name: 'probed' },
    spec: {
      tasks: [
        {
          name: 't',
          replicas: 1,
          template: {
            spec: {
              containers: [{ name: 'c', image: 'busybox', command: ['true'], ...container }],
              ...(init ? { initContainers: [{ name: 'i', image: 'busybox', ...init }] } : {}),
            },
          },
        },
      ],
    },
  },
];

function issues(documents: unknown[]): string[] {
  try {
    readManifest(documents, 'job.yaml', resolveSecurityPolicy());
  } catch (e) {
    assert.ok(e instanceof ValidationError);
    return e.issues.map(
      (i) => `${i.path.replace('job.yaml.spec.tasks[0].template.spec.', '')}: ${i.message}`,
    );
  }
  return [];
}

test('exec, httpGet and tcpSocket probes with the timing fields are accepted, named ports too', () => {
  assert.deepEqual(
    issues(
      manifest({
        ports: [{ name: 'web', containerPort: 8080 }],
        startupProbe: {
          exec: { command: ['test', '-e', '/tmp/up'] },
          failureThreshold: 30,
          periodSeconds: 1,
        },
        readinessProbe: {
          httpGet: { path: '/ready', port: 'web', httpHeaders: [{ name: 'X-Probe', value: '1' }] },
          initialDelaySeconds: 2,
          successThreshold: 2,
          timeoutSeconds: 3,
        },
        livenessProbe: { tcpSocket: { port: 8080 }, terminationGracePeriodSeconds: 5 },
      }),
    ),
    [],
  );
});

test('every probe field the local backend cannot honour, or Kubernetes refuses, is named', () => {
  const notHere = 'the local backend cannot honour';
  assert.deepEqual(
    issues(
      manifest(
        {
          readinessProbe: { grpc: { port: 9000 }, terminationGracePeriodSeconds: 3 },
          livenessProbe: {
            httpGet: { port: 'metrics', host: 'example.org', scheme: 'HTTPS', path: 'x' },
            successThreshold: 2,
            periodSeconds: -1,
          },
          startupProbe: { tcpSocket: { port: 70000 }, exec: { command: [] }, extra: true },
        },
        { readinessProbe: { exec: { command: ['true'] } } },
      ),
    ),
    [
      `containers[0].readinessProbe.terminationGracePeriodSeconds: is not allowed on a readinessProbe`,
      `containers[0].readinessProbe.grpc: ${notHere} gRPC probes; remove it to run here`,
      'containers[0].livenessProbe.periodSeconds: must be a whole number of 0 or more (0: the default)',
      'containers[0].livenessProbe.successThreshold: must be 1 for a livenessProbe',
      'containers[0].livenessProbe.httpGet.port: names no port of the container (its ports: none named)',
      `containers[0].livenessProbe.httpGet.host: ${notHere} probing another host than the pod; remove it to run here`,
      'containers[0].livenessProbe.httpGet.path: must be a path starting with /',
      `containers[0].livenessProbe.httpGet.scheme: ${notHere} HTTPS probes; remove it to run here`,
      `containers[0].startupProbe.extra: ${notHere} the probe field extra; remove it to run here`,
      'containers[0].startupProbe: must have exactly one of exec, httpGet, tcpSocket (or grpc)',
      'containers[0].startupProbe.exec.command: must be a non-empty list of strings',
      'containers[0].startupProbe.tcpSocket.port: must be a port from 1 to 65535',
      'initContainers[0].readinessProbe: init containers have no probes (Kubernetes refuses them)',
    ],
  );
});
