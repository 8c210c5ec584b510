import { useState } from 'preact/hooks';
import { ApiError, postJson } from '../api.ts';
import { Options } from '../components/options.tsx';
import { AdminLists } from './admin-lists.tsx';

interface FormSpec {
  title: string;
  path: string;
  fields: {
    name: string;
    label: string;
    type?: 'text' | 'number' | 'checkbox' | 'select';
    options?: string[];
  }[];
  /** The request body for what was typed. */
  body: (values: Record<string, string>) => unknown;
  done: (answer: Record<string, unknown>) => string;
}

const FORMS: FormSpec[] = [
  {
    title: 'Create a user',
    path: '/api/admin/users',
    fields: [
      { name: 'name', label: 'User name' },
      { name: 'admin', label: 'Administrator', type: 'checkbox' },
    ],
    body: (v) => ({ name: v.name, admin: v.admin === 'true' }),
    done: (a) => `User ${a.name} created.`,
  },
  {
    title: 'Make an API token',
    path: '/api/admin/tokens',
    fields: [
      { name: 'username', label: 'User name' },
      { name: 'description', label: 'What it is for' },
    ],
    body: (v) => ({ username: v.username, description: v.description ?? '' }),
    done: (a) => `Token (shown once): ${a.token}`,
  },
  {
    title: 'Create a project',
    path: '/api/admin/projects',
    fields: [
      { name: 'id', label: 'Project id' },
      { name: 'title', label: 'Title' },
    ],
    body: (v) => ({ id: v.id, title: v.title }),
    done: (a) => `Project ${a.id} created.`,
  },
  {
    title: 'Add a project member',
    path: '/api/admin/projects/members',
    fields: [
      { name: 'projectId', label: 'Project id' },
      { name: 'username', label: 'User name' },
      { name: 'role', label: 'Role', type: 'select', options: ['USER', 'ADMIN', 'PI'] },
    ],
    body: (v) => ({ projectId: v.projectId, username: v.username, role: v.role ?? 'USER' }),
    done: (a) => `${a.username} is ${a.role} of ${a.projectId}.`,
  },
  {
    title: 'Grant credits',
    path: '/api/accounting/allocations',
    fields: [
      { name: 'owner', label: 'Owner (user:NAME or project:ID)' },
      { name: 'category', label: 'Product category' },
      { name: 'credits', label: 'Credits', type: 'number' },
    ],
    body: (v) => ({ owner: v.owner, category: v.category, credits: Number(v.credits) }),
    done: (a) => `Granted ${a.credits} credits of ${a.category} to ${a.owner}.`,
  },
];

function AdminForm({ spec }: { spec: FormSpec }) {
  const [values, setValues] = useState<Record<string, string>>({});
  const [result, setResult] = useState<{ ok: boolean; text: string; issues: Record<string, string> } | null>(
    null,
  );
  const id = (field: string) => `${spec.path.replace(/\W/g, '-')}-${field}`;
  const submit = async (event: Event) => {
    event.preventDefault();
    try {
      const answer = await postJson<Record<string, unknown>>(spec.path, spec.body(values));
      setResult({ ok: true, text: spec.done(answer), issues: {} });
    } catch (e) {
      const issues =
        e instanceof ApiError ? Object.fromEntries(e.issues.map((i) => [i.path, i.message])) : {};
      setResult({ ok: false, text: (e as Error).message, issues });
    }
  };
  return (
    <form class="card" onSubmit={submit}>
      <h2>{spec.title}</h2>
      {spec.fields.map((f) => (
        <div class={`field${result?.issues[f.name] ? ' invalid' : ''}`} key={f.name}>
          {f.type === 'checkbox' ? (
            <label>
              <input
                id={id(f.name)}
                type="checkbox"
                checked={values[f.name] === 'true'}
                onChange={(e) => setValues({ ...values, [f.name]: String(e.currentTarget.checked) })}
              />{' '}
              {f.label}
            </label>
          ) : (
            <>
              <label for={id(f.name)}>{f.label}</label>
              {f.type === 'select' ? (
                <select
                  id={id(f.name)}
                  value={values[f.name] ?? f.options?.[0]}
                  onChange={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })}
                >
                  <Options values={f.options ?? []} />
                </select>
              ) : (
                <input
                  id={id(f.name)}
                  type={f.type ?? 'text'}
                  value={values[f.name] ?? ''}
                  aria-invalid={result?.issues[f.name] !== undefined}
                  onInput={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })}
                />
              )}
            </>
          )}
          {result?.issues[f.name] !== undefined && <p class="error">{result.issues[f.name]}</p>}
        </div>
      ))}
      <button type="submit" class="primary">
        {spec.title}
      </button>
      {result !== null && (
        <p class={result.ok ? 'notice' : 'error'} role="status">
          {result.text}
        </p>
      )}
    </form>
  );
}

/**
 * Administration: the lists (users, projects, tokens, grants, the audit log) with what takes access
 * away, then the forms that make users, tokens, projects, members and grants of credits.
 */
export function AdminPage() {
  return (
    <section>
      <h1>Administration</h1>
      <AdminLists />
      <h2>Create</h2>
      <div class="grid">
        {FORMS.map((spec) => (
          <AdminForm key={spec.path} spec={spec} />
        ))}
      </div>
    </section>
  );
}
