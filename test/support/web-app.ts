/** The web interface in tests and benchmarks: its build, and checks of its pages in Chromium. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { ROOT } from './fixtures.ts';

export const WEB_DIST = join(ROOT, 'web', 'dist');

/** web/dist as the set-up script leaves it; built here when missing (a checkout without the set-up run). */
export function builtWebApp(): void {
  if (existsSync(join(WEB_DIST, 'index.html'))) return;
  execFileSync(
    process.execPath,
    [join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', 'web', '--logLevel', 'warn'],
    {
      cwd: ROOT,
      stdio: 'inherit',
    },
  );
}

const AXE = readFileSync(join(ROOT, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's serious and critical violations on the page as it is now (none expected). */
export async function seriousViolations(page: Page): Promise<string[]> {
  // Evaluated, not added as a script: the interface's Content-Security-Policy refuses inline scripts.
  if (!(await page.evaluate(() => 'axe' in globalThis))) await page.evaluate(AXE);
  const violations = await page.evaluate(
    async () =>
      (
        (await (
          globalThis as unknown as { axe: { run(): Promise<{ violations: unknown[] }> } }
        ).axe.run()) as {
          violations: Violation[];
        }
      ).violations,
  );
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/**
 * Screenshots of the page at desktop and phone widths into `folder`, and the accessibility check at
 * both widths.
 */
export async function capture(page: Page, folder: string, name: string): Promise<void> {
  for (const [width, size] of [
    ['desktop', DESKTOP],
    ['phone', PHONE],
  ] as const) {
    await page.setViewportSize(size);
    await page.screenshot({ path: join(folder, `${name}-${width}.png`), fullPage: true });
    assert.deepEqual(await seriousViolations(page), [], `${name} at ${width} width`);
  }
  await page.setViewportSize(DESKTOP);
}
