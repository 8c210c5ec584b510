import { lazy, Suspense } from 'preact/compat';
import { useEffect } from 'preact/hooks';
import { loadSession, session, signOut } from './api.ts';
import { WorkspaceSelect } from './components/workspace-select.tsx';
import { CataloguePage } from './pages/catalogue.tsx';
import { JobPage } from './pages/job.tsx';
import { JobsPage } from './pages/jobs.tsx';
import { SignInPage } from './pages/sign-in.tsx';
import { Link, pathOf, queryOf, route } from './router.tsx';
import { workspace } from './workspace.ts';

// The usage chart (uPlot) loads when its page is opened; the terminal and the resource charts load
// from the job page; the launch form, files, administration, SSH keys and the starting page load
// when opened: the first load is the catalogue, the jobs and a job.
const LaunchPage = lazy(() => import('./pages/launch.tsx').then((m) => ({ default: m.LaunchPage })));
const FilesPage = lazy(() => import('./pages/files.tsx').then((m) => ({ default: m.FilesPage })));
const UsagePage = lazy(() => import('./pages/usage.tsx').then((m) => ({ default: m.UsagePage })));
const AdminPage = lazy(() => import('./pages/admin.tsx').then((m) => ({ default: m.AdminPage })));
const ConnectPage = lazy(() => import('./pages/connect.tsx').then((m) => ({ default: m.ConnectPage })));
const SshKeysPage = lazy(() => import('./pages/ssh-keys.tsx').then((m) => ({ default: m.SshKeysPage })));

const NAV = [
  { href: '/', label: 'Applications' },
  { href: '/jobs', label: 'Jobs' },
  { href: '/files', label: 'Files' },
  { href: '/usage', label: 'Usage' },
];

function Page() {
  const path = pathOf();
  const job = /^\/jobs\/([a-z0-9]+)$/.exec(path);
  const launch = /^\/apps\/([^/]+)$/.exec(path);
  const connect = /^\/jobs\/([a-z0-9]+)\/connect$/.exec(path);
  if (path === '/') return <CataloguePage />;
  if (launch) return <LaunchPage name={decodeURIComponent(launch[1]!)} />;
  if (path === '/jobs') return <JobsPage />;
  if (job) return <JobPage id={job[1]!} />;
  if (connect) return <ConnectPage id={connect[1]!} rank={Number(queryOf().get('rank') ?? 0) || 0} />;
  if (path === '/files') return <FilesPage />;
  if (path === '/usage') return <UsagePage />;
  if (path === '/ssh-keys') return <SshKeysPage />;
  if (path === '/admin' && session.value?.user.admin) return <AdminPage />;
  return (
    <section>
      <h1>Not found</h1>
      <p>
        There is no page here. <Link href="/">Back to the applications</Link>.
      </p>
    </section>
  );
}

export function App() {
  useEffect(() => {
    void loadSession();
  }, []);
  const current = session.value;
  // Read so that the page re-renders on navigation.
  const path = route.value.split('?')[0];
  if (current === undefined) return <p class="loading">Loading…</p>;
  if (current === null) return <SignInPage />;
  const nav = current.user.admin ? [...NAV, { href: '/admin', label: 'Administration' }] : NAV;
  const active = (href: string) =>
    href === '/' ? path === '/' || path?.startsWith('/apps/') : path?.startsWith(href);
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <Link href="/" class="brand">
          ucompute
        </Link>
        <nav aria-label="Main">
          <ul>
            {nav.map((item) => (
              <li key={item.href}>
                <Link href={item.href} aria-current={active(item.href) ? 'page' : undefined}>
                  {item.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <WorkspaceSelect user={current.user} />
          <details class="user-menu">
            <summary>{current.user.username}</summary>
            {/* biome-ignore lint/a11y/useKeyWithClickEvents: the links and button inside take the keys; this only closes the menu after them */}
            <ul
              class="user-menu-items"
              onClick={(e) => ((e.currentTarget.parentElement as HTMLDetailsElement).open = false)}
            >
              <li>
                <Link href="/ssh-keys">SSH keys</Link>
              </li>
              <li>
                <button type="button" class="link" onClick={() => void signOut()}>
                  Sign out
                </button>
              </li>
            </ul>
          </details>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Suspense fallback={<p class="loading">Loading…</p>}>
          {/* A new workspace reads every page again: its jobs, files and credits. */}
          <Page key={workspace.value} />
        </Suspense>
      </main>
    </>
  );
}
