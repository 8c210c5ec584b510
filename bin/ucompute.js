#!/usr/bin/env node
// A plain-JS shim so that an old Node fails with a clear message instead of a syntax error.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(
    `ucompute needs Node.js >= 22.18 (it runs its TypeScript sources directly); this is ${process.version}.`,
  );
  process.exit(1);
}
// Node keeps what it compiled (the sources with their types stripped) in its compile cache
// ($NODE_COMPILE_CACHE, else the temporary folder): a command starts in about half the CPU time.
const { enableCompileCache } = await import('node:module');
enableCompileCache();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
