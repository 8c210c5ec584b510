// Cookies as ucompute reads them: the web interface's session on the API's host, the apps' own
// sessions on theirs.

/** The web interface's cookie: host-only on the API's host; job origins never receive it. */
export const UI_COOKIE = 'ucompute_session';

export interface CookiePair {
  /** '' for a pair without a name. */
  name: string;
  value: string;
  /** As the browser sent it, for passing it on. */
  text: string;
}

/** The pairs of a Cookie header in order; a name may come twice (a sibling origin may set one more). */
export function cookiePairs(header: string | undefined): CookiePair[] {
  const pairs: CookiePair[] = [];
  for (const part of (header ?? '').split(';')) {
    const text = part.trim();
    if (text === '') continue;
    const eq = text.indexOf('=');
    pairs.push(
      eq > 0 ? { name: text.slice(0, eq), value: text.slice(eq + 1), text } : { name: '', value: text, text },
    );
  }
  return pairs;
}
