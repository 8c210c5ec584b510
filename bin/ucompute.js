#!/usr/bin/env node
// A plain-JS shim so that an old Node fails with a clear message instead of a syntax error.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(
    `ucompute needs Node.js >= 22.18 (it runs its TypeScript sources directly); this is ${process.version}.`,
  );
  process.exit(1);
}
await import('../src/cli/main.ts');
