import { useState } from 'preact/hooks';
import { ApiError, signIn } from '../api.ts';
import { ErrorAlert } from '../components/error-alert.tsx';

/** A token (from `ucompute web`, an administrator, or the data folder's admin.token) for a session cookie. */
export function SignInPage() {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await signIn(token.trim());
    } catch (e) {
      setError(
        e instanceof ApiError && e.status === 401 ? 'That token is not valid.' : String((e as Error).message),
      );
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="sign-in">
      <h1>ucompute</h1>
      <form onSubmit={submit} class="card">
        <h2>Sign in</h2>
        <p class="hint">
          Paste an API token, or run <code>ucompute web</code> for a one-time sign-in link.
        </p>
        <label for="token">API token</label>
        <input
          id="token"
          type="password"
          autocomplete="off"
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
          aria-invalid={error !== null}
          aria-describedby={error !== null ? 'token-error' : undefined}
          required
        />
        <ErrorAlert id="token-error" message={error} />
        <button type="submit" class="primary" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
