import { useEffect, useMemo, useState } from 'preact/hooks';
import { getJson } from '../api.ts';
import { SessionCards } from '../components/session-cards.tsx';
import { markdownHtml } from '../markdown.ts';
import { Link } from '../router.tsx';
import type { AppSummary } from '../types.ts';

/** The landing page: every application with its description and tags, and a search over them. */
export function CataloguePage() {
  const [apps, setApps] = useState<AppSummary[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [query, setQuery] = useState('');
  useEffect(() => {
    getJson<{ items: AppSummary[] }>('/api/apps')
      .then((r) => setApps(r.items))
      .catch((e: Error) => setError(e.message));
  }, []);
  const shown = useMemo(() => {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    return (apps ?? []).filter((a) => {
      const text = [a.title, a.name, a.description, a.applicationType, ...a.tags].join(' ').toLowerCase();
      return words.every((w) => text.includes(w));
    });
  }, [apps, query]);
  return (
    <section>
      <SessionCards />
      <h1>Applications</h1>
      <div class="toolbar">
        <label for="app-search" class="visually-hidden">
          Search applications
        </label>
        <input
          id="app-search"
          type="search"
          placeholder="Search by name, description or tag"
          value={query}
          onInput={(e) => setQuery(e.currentTarget.value)}
        />
      </div>
      {error !== null && <p class="error">{error}</p>}
      {apps === null && error === null && <p class="loading">Loading…</p>}
      {apps !== null && shown.length === 0 && <p>No application matches “{query}”.</p>}
      <ul class="apps">
        {shown.map((summary) => (
          <li key={summary.name} class="card app">
            <h2>
              <Link href={`/apps/${encodeURIComponent(summary.name)}`}>{summary.title}</Link>
            </h2>
            <p class="meta">
              <span class={`badge type-${summary.applicationType.toLowerCase()}`}>
                {summary.applicationType}
              </span>
              <span>v{summary.version}</span>
            </p>
            {/* Rendered Markdown, sanitised by DOMPurify (markdown.ts). */}
            <div
              class="description"
              dangerouslySetInnerHTML={{ __html: markdownHtml(summary.description) }}
            />
            <ul class="tags" aria-label="Tags">
              {summary.tags.map((t) => (
                <li key={t}>
                  <button type="button" class="tag" onClick={() => setQuery(t)}>
                    {t}
                  </button>
                </li>
              ))}
            </ul>
          </li>
        ))}
      </ul>
    </section>
  );
}
