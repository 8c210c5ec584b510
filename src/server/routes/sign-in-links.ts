import { randomBytes } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { cookiePairs } from '../../interactive/cookies.ts';
import { type ApiRoutes, publicRoute } from '../api.ts';
import { cookieSession, cookieText, sameSecret, sessionCookie } from '../auth.ts';

const LinkQuery = Type.Object({ ticket: Type.Optional(Type.String({ maxLength: 1024 })) });
const LinkForm = Type.Object({
  ticket: Type.Optional(Type.String({ maxLength: 1024 })),
  nonce: Type.Optional(Type.String({ maxLength: 1024 })),
});

/** How long the confirmation page's form may be sent: a link's own lifetime. */
const FORM_LIFETIME_SECONDS = 120;

/** The cookie that ties the form to the page this browser was shown (`__Host-` over TLS). */
const formCookieName = (request: FastifyRequest) =>
  request.server.publicUrl.secure() ? '__Host-ucompute_link' : 'ucompute_link';

const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  // The secret is in the address and the form: no page here refers another site to it, none
  // frames it. (Not no-referrer: under it browsers send the form's POST with `Origin: null`.)
  'referrer-policy': 'same-origin',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; form-action 'self'; frame-ancestors 'none'",
};

const page = (body: string) =>
  `<!doctype html><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>Sign in to ucompute</title>${body}`;

/** The page of a used, expired or unknown sign-in link. */
const EXPIRED_LINK_PAGE = page(
  '<p>This sign-in link was used already or has expired (a link works once, within two minutes).</p>' +
    '<p>For a new one, run <code>ucompute web</code>, or sign in with an API token.</p>',
);

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * One-time sign-in links (`ucompute web`): opening one shows a page that says whose account it
 * signs in to (and whose session it would replace), and only its button, a POST from that page,
 * signs the browser in. A link alone never replaces a session: another person's link, opened by
 * following it from anywhere, signs nobody in. The POST must come from this service's own origin
 * and carry the nonce its page set in a SameSite=Strict cookie, so a form on another site cannot
 * send it either.
 */
export const signInLinkRoutes: ApiRoutes = async (api) => {
  const { signIns } = api;
  // The page's form, and nothing else here, is sent as a URL-encoded form.
  api.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 4096 },
    (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(String(body)))),
  );

  api.get(
    '/auth/link',
    {
      config: publicRoute,
      schema: {
        summary: 'A sign-in link: a page that asks before signing the browser in',
        tags: ['auth'],
        security: [],
        querystring: LinkQuery,
      },
    },
    async (request, reply) => {
      reply.headers(PAGE_HEADERS);
      const ticket = request.query.ticket ?? '';
      const holder = await signIns.linkHolder(ticket);
      if (holder === undefined) return reply.code(410).send(EXPIRED_LINK_PAGE);
      const current = await signedInAs(request, reply);
      const nonce = randomBytes(32).toString('base64url');
      const replaced =
        current !== undefined && current !== holder
          ? `<p>This browser is signed in as <strong>${escapeHtml(current)}</strong>: signing in as ${escapeHtml(holder)} signs ${escapeHtml(current)} out here.</p>`
          : '';
      return reply
        .header('set-cookie', cookieText(request, formCookieName(request), nonce, FORM_LIFETIME_SECONDS))
        .send(
          page(
            `<h1>Sign in to ucompute as ${escapeHtml(holder)}?</h1>${replaced}` +
              '<form method="post" action="/auth/link">' +
              `<input type="hidden" name="ticket" value="${escapeHtml(ticket)}">` +
              `<input type="hidden" name="nonce" value="${nonce}">` +
              `<button type="submit">Sign in as ${escapeHtml(holder)}</button></form>` +
              '<p>Did you not ask for this link? Close this page: the link expires by itself.</p>',
          ),
        );
    },
  );

  api.post(
    '/auth/link',
    {
      config: publicRoute,
      schema: {
        summary: "A sign-in link's page confirmed: sets the session cookie and redirects to the interface",
        tags: ['auth'],
        security: [],
        body: LinkForm,
      },
    },
    async (request, reply) => {
      reply.headers(PAGE_HEADERS);
      const expected = cookiePairs(request.headers.cookie).find((c) => c.name === formCookieName(request));
      const fromOurPage =
        request.headers.origin === request.server.publicUrl.origin() &&
        expected !== undefined &&
        expected.value !== '' &&
        sameSecret(request.body.nonce, expected.value);
      if (!fromOurPage) {
        return reply
          .code(403)
          .send(page('<p>This sign-in was not sent from its own page here: open the link again.</p>'));
      }
      const signedIn = await signIns.redeemLink(request.body.ticket ?? '');
      if (!signedIn) return reply.code(410).send(EXPIRED_LINK_PAGE);
      return reply
        .code(303)
        .header('location', '/')
        .header('set-cookie', [
          sessionCookie(request, signedIn.secret),
          cookieText(request, formCookieName(request), '', 0),
        ])
        .send();
    },
  );
};

/** Who the browser is signed in as now, if anyone (a cookie the server would refuse says nobody). */
async function signedInAs(request: FastifyRequest, reply: FastifyReply): Promise<string | undefined> {
  try {
    return (await cookieSession(request.server.signIns, request, reply))?.session.caller.username;
  } catch {
    return undefined;
  }
}
