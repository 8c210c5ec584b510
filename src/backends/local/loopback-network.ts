import type { Network } from './network.ts';
import { addressAllocator } from './network-addresses.ts';

/** Without root: the host network, a loopback address per pod, nothing enforced. */
export function loopbackNetwork(reserved: readonly string[]): Network {
  // 127.0.0.0/8 is routed to lo on Linux, so every 127.x address works without configuration.
  const addresses = addressAllocator(127 * 2 ** 24 + 89 * 2 ** 16 + 2, 2 ** 16 - 3);
  for (const ip of reserved) addresses.mark(ip);
  return {
    description: 'network: host network, a loopback address per pod',
    warnings: [
      'pods share the host network: each has its own loopback address, but network isolation is not enforced',
    ],
    acquire: async () => ({ ip: addresses.take(), netns: null, veth: null }),
    allowPeers: async () => undefined,
    release: async (n) => {
      addresses.free(n.ip);
    },
    namespaceFile: () => null,
    removeLeftovers: async () => undefined,
    close: async () => undefined,
  };
}
