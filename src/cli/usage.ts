import { periodMillis } from '../model/price-period.ts';
import type { Product } from '../model/product.ts';
import { clientFlags, parseClientCommand, stringOption } from './args.ts';
import { CLIENT_OPTIONS_USAGE, connect } from './client.ts';
import { DATE_FORMS, formatUtc, parseDate } from './dates.ts';
import { CliError } from './errors.ts';
import { listOf, printJson, table } from './format.ts';
import { cliIo } from './io.ts';

/** `ucompute balance` and `ucompute usage`: the caller's credits, in words and dates instead of epoch ms. */

export const BALANCE_USAGE = `Usage: ucompute balance [options]

Shows what is left in each of your wallets (your own, and those of the projects you manage; with
--project, that project's, which every member may see): per
product category, the credits left, used and allocated, and what the credits left buy on the
category's cheapest machine type (e.g. "16,666 vCPU-hours").

${CLIENT_OPTIONS_USAGE}`;

export const USAGE_USAGE = `Usage: ucompute usage [--since DATE] [--until DATE] [--by day|hour] [options]

Credits charged per UTC day (or hour) and product category, for your wallets and those of the
projects you manage, with a total per wallet and category.

Options:
  --since DATE        from this time (default: 30 days before --until)
  --until DATE        up to this time, exclusive (default: now)
  --by day|hour       bucket size (default day)

DATE: ${DATE_FORMS}.

${CLIENT_OPTIONS_USAGE}`;

interface Wallet {
  owner: string;
  category: string;
  allocated: number;
  used: number;
  balance: number;
}

interface UsageResponse {
  from: number;
  to: number;
  bucket: 'day' | 'hour';
  items: { owner: string; category: string; start: number; credits: number }[];
}

const credits = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 2 });

/** `user:alice` -> `alice`, `project:p1` -> `project p1`: how a person names a wallet. */
const ownerName = (owner: string) =>
  owner.startsWith('project:') ? `project ${owner.slice(8)}` : owner.slice(5);

/**
 * What `balance` credits buy on the category's cheapest product, in unit-hours: the price is per
 * vCPU (or GPU) per period, so credits / price periods of one unit.
 */
export function buysInHours(balance: number, products: Product[], category: string): string {
  const priced = products.filter((p) => p.category === category && p.pricePerUnit > 0);
  if (priced.length === 0 || balance <= 0) return '-';
  const hourly = (p: Product) => p.pricePerUnit * (3_600_000 / periodMillis(p.unitOfPrice));
  const cheapest = priced.reduce((a, b) => (hourly(b) < hourly(a) ? b : a));
  const hours = Math.floor(balance / hourly(cheapest));
  return `${hours.toLocaleString('en-US')} ${cheapest.pricedPer === 'GPU' ? 'GPU' : 'vCPU'}-hours`;
}

export async function balanceCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, BALANCE_USAGE, {});
  if (help) return 0;
  if (positionals.length > 0) throw new CliError(`unexpected "${positionals[0]}"\n\n${BALANCE_USAGE}`);
  const client = await connect(clientFlags(values));
  const [wallets, products] = await Promise.all([
    client.get<unknown>('/api/accounting/wallets').then((r) => listOf<Wallet>(r)),
    client.get<unknown>('/api/products').then((r) => listOf<Product>(r)),
  ]);
  if (values.json) {
    printJson({ items: wallets });
    return 0;
  }
  if (wallets.length === 0) {
    cliIo().stdout.write('no wallets: ask an administrator for credits (ucompute admin grant)\n');
    return 0;
  }
  cliIo().stdout.write(
    table(
      ['WALLET', 'CATEGORY', 'LEFT', 'USED', 'ALLOCATED', 'LEFT BUYS'],
      wallets.map((w) => [
        ownerName(w.owner),
        w.category,
        credits(w.balance),
        credits(w.used),
        credits(w.allocated),
        buysInHours(w.balance, products, w.category),
      ]),
    ),
  );
  return 0;
}

export async function usageCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseClientCommand(argv, USAGE_USAGE, {
    since: { type: 'string' },
    until: { type: 'string' },
    by: { type: 'string' },
  });
  if (help) return 0;
  if (positionals.length > 0) throw new CliError(`unexpected "${positionals[0]}"\n\n${USAGE_USAGE}`);
  const by = stringOption(values, 'by') ?? 'day';
  if (by !== 'day' && by !== 'hour') throw new CliError(`--by: "${by}" must be day or hour`);
  const now = Date.now();
  const sinceText = stringOption(values, 'since');
  const untilText = stringOption(values, 'until');
  const until = untilText !== undefined ? parseDate(untilText, '--until', now) : undefined;
  const since = sinceText !== undefined ? parseDate(sinceText, '--since', now) : undefined;
  if (since !== undefined && since >= (until ?? now)) {
    throw new CliError(`--since: ${sinceText} must be before ${untilText ?? 'now'}`);
  }
  const client = await connect(clientFlags(values));
  const response = await client.get<UsageResponse>('/api/accounting/usage', {
    from: since,
    to: until,
    bucket: by,
  });
  const items = response.items;
  if (values.json) {
    printJson(response);
    return 0;
  }
  const hourly = response.bucket === 'hour';
  const period = `${formatUtc(response.from, true)} to ${formatUtc(response.to, true)} UTC`;
  if (items.length === 0) {
    cliIo().stdout.write(`no credits charged from ${period}\n`);
    return 0;
  }
  const totals = new Map<string, number>();
  for (const i of items) {
    const key = `${ownerName(i.owner)}\u0000${i.category}`;
    totals.set(key, (totals.get(key) ?? 0) + i.credits);
  }
  const rows = items.map((i) => [
    formatUtc(i.start, hourly),
    ownerName(i.owner),
    i.category,
    credits(i.credits),
  ]);
  for (const [key, total] of totals) rows.push(['total', ...key.split('\u0000'), credits(total)]);
  cliIo().stdout.write(
    `credits charged from ${period}\n${table([hourly ? 'HOUR' : 'DAY', 'WALLET', 'CATEGORY', 'CREDITS'], rows)}`,
  );
  return 0;
}
