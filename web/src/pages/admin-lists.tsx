import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { getJson, postJson } from '../api.ts';
import { ConfirmDialog } from '../components/dialog.tsx';
import { credits, when } from '../format.ts';

// What administrators see: users, projects, tokens (metadata only), grants and the audit log,
// each searched; and the changes that take access away, each confirmed first.

interface User {
  name: string;
  admin: boolean;
  disabledAt: number | null;
  tokens: number;
  createdAt: number;
  projects: { id: string; role: string }[];
}
interface Project {
  id: string;
  title: string;
  createdAt: number;
  members: { username: string; role: string }[];
}
interface Token {
  id: string;
  username: string;
  description: string;
  createdAt: number;
}
interface Grant {
  id: number;
  owner: string;
  category: string;
  credits: number;
  used: number;
  startAt: number;
  endAt: number;
}
interface AuditEntry {
  id: number;
  at: number;
  actor: string;
  action: string;
  target: string;
  details: Record<string, unknown>;
}

const TABS = ['Users', 'Projects', 'Tokens', 'Grants', 'Audit log'] as const;
type Tab = (typeof TABS)[number];
const PATHS: Record<Tab, string> = {
  Users: '/api/admin/users',
  Projects: '/api/admin/projects',
  Tokens: '/api/admin/tokens',
  Grants: '/api/admin/grants',
  'Audit log': '/api/admin/audit',
};

/** A change to confirm: what the dialog asks, and the call that makes it. */
interface Asking {
  title: string;
  text: string;
  action: string;
  run: () => Promise<unknown>;
}

export function AdminLists() {
  const [tab, setTab] = useState<Tab>('Users');
  const [query, setQuery] = useState('');
  const [items, setItems] = useState<unknown[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [asking, setAsking] = useState<Asking | null>(null);
  const [version, setVersion] = useState(0);

  useEffect(() => {
    setError(null);
    const search = tab === 'Audit log' ? { action: query || undefined } : { query: query || undefined };
    const timer = setTimeout(() => {
      getJson<{ items: unknown[] }>(PATHS[tab], { ...search, itemsPerPage: 200 })
        .then((page) => setItems(page.items))
        .catch((e: Error) => setError(e.message));
    }, 200);
    return () => clearTimeout(timer);
  }, [tab, query, version]);

  const confirm = (a: Asking) => setAsking(a);
  const table = (headers: string[], rows: ComponentChildren[][]) => (
    <table class="admin-list" aria-label={tab}>
      <thead>
        <tr>
          {headers.map((h) => (
            <th scope="col" key={h}>
              {h}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((cells, i) => (
          <tr key={i}>
            {cells.map((c, j) => (
              <td key={j}>{c}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );

  const rows = (): ComponentChildren => {
    if (items === null) return <p class="loading">Loading…</p>;
    if (items.length === 0) return <p class="muted">Nothing matches.</p>;
    switch (tab) {
      case 'Users':
        return table(
          ['Name', 'Projects', 'Tokens', 'Created', ''],
          (items as User[]).map((u) => [
            <>
              {u.name} {u.admin && <span class="badge">admin</span>}{' '}
              {u.disabledAt !== null && <span class="badge state-failure">disabled</span>}
            </>,
            u.projects.map((p) => `${p.id} (${p.role})`).join(', '),
            u.tokens,
            when(u.createdAt),
            u.disabledAt === null ? (
              <button
                type="button"
                class="small danger"
                onClick={() =>
                  confirm({
                    title: `Disable ${u.name}?`,
                    text: 'Their tokens, sign-ins and sessions stop working at once; their jobs go on. You can enable them again.',
                    action: 'Disable',
                    run: () => postJson('/api/admin/users/disable', { items: [{ name: u.name }] }),
                  })
                }
              >
                Disable
              </button>
            ) : (
              <button
                type="button"
                class="small"
                onClick={() =>
                  void change(() => postJson('/api/admin/users/enable', { items: [{ name: u.name }] }))
                }
              >
                Enable
              </button>
            ),
          ]),
        );
      case 'Projects':
        return table(
          ['Project', 'Members', 'Created'],
          (items as Project[]).map((p) => [
            <>
              {p.id} <span class="muted">{p.title}</span>
            </>,
            <ul class="members">
              {p.members.map((m) => (
                <li key={m.username}>
                  {m.username} ({m.role}){' '}
                  <button
                    type="button"
                    class="link"
                    aria-label={`Remove ${m.username} from ${p.id}`}
                    onClick={() =>
                      confirm({
                        title: `Remove ${m.username} from ${p.id}?`,
                        text: "They lose the project's jobs, files and credits; their jobs there go on.",
                        action: 'Remove',
                        run: () =>
                          postJson('/api/admin/projects/members/remove', {
                            projectId: p.id,
                            username: m.username,
                          }),
                      })
                    }
                  >
                    remove
                  </button>
                </li>
              ))}
            </ul>,
            when(p.createdAt),
          ]),
        );
      case 'Tokens':
        return table(
          ['Id', 'User', 'Description', 'Created', ''],
          (items as Token[]).map((t) => [
            <code>{t.id}</code>,
            t.username,
            t.description,
            when(t.createdAt),
            <button
              type="button"
              class="small danger"
              aria-label={`Revoke token ${t.id}`}
              onClick={() =>
                confirm({
                  title: `Revoke token ${t.id}?`,
                  text: `${t.username}'s token "${t.description}" opens nothing from now on.`,
                  action: 'Revoke',
                  run: () => postJson('/api/admin/tokens/revoke', { items: [{ id: t.id }] }),
                })
              }
            >
              Revoke
            </button>,
          ]),
        );
      case 'Grants':
        return table(
          ['Owner', 'Category', 'Credits', 'Used', 'Valid'],
          (items as Grant[]).map((g) => [
            g.owner,
            g.category,
            credits(g.credits),
            credits(g.used),
            `${when(g.startAt)} – ${when(g.endAt)}`,
          ]),
        );
      default:
        return table(
          ['When', 'Who', 'Action', 'Target', 'Details'],
          (items as AuditEntry[]).map((e) => [
            when(e.at),
            e.actor,
            e.action,
            e.target,
            Object.entries(e.details)
              .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
              .join(', '),
          ]),
        );
    }
  };

  const change = async (run: () => Promise<unknown>) => {
    try {
      await run();
    } catch (e) {
      setError((e as Error).message);
    }
    setVersion((v) => v + 1);
  };

  return (
    <section class="admin-lists">
      <div class="tabs" role="tablist" aria-label="Lists">
        {TABS.map((t) => (
          <button
            key={t}
            type="button"
            role="tab"
            aria-selected={t === tab}
            onClick={() => {
              setTab(t);
              setItems(null);
              setQuery('');
            }}
          >
            {t}
          </button>
        ))}
      </div>
      <div class="toolbar">
        <label for="admin-search" class="visually-hidden">
          Search
        </label>
        <input
          id="admin-search"
          type="search"
          placeholder={tab === 'Audit log' ? 'Action, or its start (token, user.disable)' : 'Search by name'}
          value={query}
          onInput={(e) => setQuery(e.currentTarget.value)}
        />
      </div>
      {error !== null && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {rows()}
      {asking !== null && (
        <ConfirmDialog
          title={asking.title}
          action={asking.action}
          onConfirm={() => asking.run().then(() => setVersion((v) => v + 1))}
          onClose={() => setAsking(null)}
        >
          <p>{asking.text}</p>
        </ConfirmDialog>
      )}
    </section>
  );
}
