import { useEffect, useState } from 'preact/hooks';
import { ApiError, getJson, postJson, sendJson } from '../api.ts';
import { ErrorAlert } from '../components/error-alert.tsx';
import { when } from '../format.ts';

interface SshKey {
  id: string;
  createdAt: number;
  fingerprint: string;
  specification: { title: string; key: string };
}

/** The signed-in user's SSH public keys: jobs of applications with ssh accept them. */
export function SshKeysPage() {
  const [keys, setKeys] = useState<SshKey[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [title, setTitle] = useState('');
  const [key, setKey] = useState('');
  const [problem, setProblem] = useState<string | null>(null);

  const read = () =>
    getJson<{ items: SshKey[] }>('/api/ssh/browse', { itemsPerPage: 1000 })
      .then((page) => setKeys(page.items))
      .catch((e: Error) => setError(e.message));
  useEffect(() => {
    void read();
  }, []);

  const add = async (event: Event) => {
    event.preventDefault();
    setProblem(null);
    const line = key.trim();
    const named = title.trim() || line.split(/\s+/).slice(2).join(' ') || 'key';
    try {
      await postJson('/api/ssh', { items: [{ title: named, key: line }] });
      setTitle('');
      setKey('');
      await read();
    } catch (e) {
      setProblem(
        e instanceof ApiError && e.issues.length > 0
          ? e.issues.map((i) => i.message).join('; ')
          : (e as Error).message,
      );
    }
  };

  const remove = async (id: string) => {
    try {
      await sendJson('DELETE', '/api/ssh', { items: [{ id }] });
      await read();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return (
    <section>
      <h1>SSH keys</h1>
      <p>
        Jobs of applications that offer ssh (such as <em>SSH server</em>) let you log in with these keys; the
        job's updates say where. The command line has the same list: <code>ucompute ssh-keys add|ls|rm</code>.
      </p>
      {error !== null && <p class="error">{error}</p>}
      {keys === null && error === null && <p class="loading">Loading…</p>}
      {keys !== null && keys.length === 0 && <p class="muted">No keys yet.</p>}
      {keys !== null && keys.length > 0 && (
        <table class="keys" aria-label="SSH keys">
          <thead>
            <tr>
              <th scope="col">Title</th>
              <th scope="col">Fingerprint</th>
              <th scope="col" class="wide">
                Added
              </th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.map((k) => (
              <tr key={k.id}>
                <td>{k.specification.title}</td>
                <td>
                  <code class="fingerprint">{k.fingerprint}</code>
                </td>
                <td class="wide">{when(k.createdAt)}</td>
                <td>
                  <button
                    type="button"
                    class="danger"
                    onClick={() => void remove(k.id)}
                    aria-label={`Remove ${k.specification.title}`}
                  >
                    Remove
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <form onSubmit={add} class="add-key" noValidate>
        <h2>Add a key</h2>
        <div class={`field${problem !== null ? ' invalid' : ''}`}>
          <label for="ssh-key">Public key (the one line of your .pub file)</label>
          <textarea
            id="ssh-key"
            rows={3}
            value={key}
            placeholder="ssh-ed25519 AAAA… you@laptop"
            onInput={(e) => setKey(e.currentTarget.value)}
            aria-invalid={problem !== null}
            aria-describedby={problem !== null ? 'ssh-key-error' : undefined}
          />
          <ErrorAlert id="ssh-key-error" message={problem ?? undefined} />
        </div>
        <div class="field">
          <label for="ssh-title">Title (optional: the key's comment)</label>
          <input id="ssh-title" type="text" value={title} onInput={(e) => setTitle(e.currentTarget.value)} />
        </div>
        <button type="submit" class="primary" disabled={key.trim() === ''}>
          Add key
        </button>
      </form>
    </section>
  );
}
