import { lazy, Suspense } from 'preact/compat';
import { useEffect } from 'preact/hooks';
import { loadSession, session, signOut } from './api.ts';
import { AdminPage } from './pages/admin.tsx';
import { CataloguePage } from './pages/catalogue.tsx';
import { FilesPage } from './pages/files.tsx';
import { JobPage } from './pages/job.tsx';
import { JobsPage } from './pages/jobs.tsx';
import { LaunchPage } from './pages/launch.tsx';
import { SignInPage } from './pages/sign-in.tsx';
import { Link, pathOf, route } from './router.tsx';

// The usage chart (uPlot) loads when its page is opened; the terminal and desktop load from the job page.
const UsagePage = lazy(() => import('./pages/usage.tsx').then((m) => ({ default: m.UsagePage })));

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
  if (path === '/') return <CataloguePage />;
  if (launch) return <LaunchPage name={decodeURIComponent(launch[1]!)} />;
  if (path === '/jobs') return <JobsPage />;
  if (job) return <JobPage id={job[1]!} />;
  if (path === '/files') return <FilesPage />;
  if (path === '/usage') return <UsagePage />;
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
          <span>{current.user.username}</span>
          <button type="button" class="link" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Suspense fallback={<p class="loading">Loading…</p>}>
          <Page />
        </Suspense>
      </main>
    </>
  );
}
