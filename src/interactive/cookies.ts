// Cookies as ucompute reads them: the web interface's session on the API's host, the apps' own
// sessions on theirs.

/**
 * The web interface's session cookie, host-only on the API's host; job origins never receive it.
 * Over TLS it is `__Host-` prefixed (Secure, no Domain, path /), a name no other site or sibling
 * subdomain can set; over plain HTTP a browser keeps no Secure cookie for most hosts, so it is
 * named plainly.
 */
export function uiCookieName(secure: boolean): string {
  return secure ? '__Host-ucompute_session' : 'ucompute_session';
}

/** Every name the web interface's cookie may have: an app is never given either. */
export const UI_COOKIES: ReadonlySet<string> = new Set([uiCookieName(true), uiCookieName(false)]);

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
