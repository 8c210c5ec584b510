/** Pods' IPv4 addresses: a subnet's parts, and the allocator that hands them out. */

export function parseSubnet(subnet: string): { base: number; prefix: number } {
  const match = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(subnet);
  const prefix = Number(match?.[5]);
  if (!match || prefix < 16 || prefix > 24) {
    throw new Error(`network subnet ${subnet} is not an IPv4 subnet between /16 and /24`);
  }
  const base = match.slice(1, 5).reduce((n, octet) => n * 256 + Number(octet), 0);
  return { base: base - (base % 2 ** (32 - prefix)), prefix };
}

export const ipOf = (n: number) => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');

/** Hands out addresses of a range in turn, skipping taken ones, so a freed address is reused late. */
export function addressAllocator(first: number, count: number) {
  const taken = new Set<string>();
  let next = 0;
  return {
    take(): string {
      for (let i = 0; i < count; i++) {
        const ip = ipOf(first + ((next + i) % count));
        if (!taken.has(ip)) {
          next = (next + i + 1) % count;
          taken.add(ip);
          return ip;
        }
      }
      throw new Error(`no free pod address left (${count} in use)`);
    },
    mark: (ip: string) => taken.add(ip),
    free: (ip: string) => taken.delete(ip),
  };
}
