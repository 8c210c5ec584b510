import { useEffect, useMemo, useState } from 'preact/hooks';
import { getJson } from '../api.ts';
import { markdownHtml } from '../markdown.ts';
import { Link } from '../router.tsx';
import type { Application, AppSummary } from '../types.ts';

interface Entry {
  summary: AppSummary;
  tags: string[];
}

/** The landing page: every application with its description and tags, and a search over them. */
export function CataloguePage() {
  const [entries, setEntries] = useState<Entry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [query, setQuery] = useState('');
  useEffect(() => {
    (async () => {
      const { items } = await getJson<{ items: AppSummary[] }>('/api/apps');
      // Tags are in each application's own document.
      const full = await Promise.all(
        items.map((s) =>
          getJson<{ application: Application }>('/api/apps/retrieve', { name: s.name, version: s.version }),
        ),
      );
      setEntries(items.map((summary, i) => ({ summary, tags: full[i]?.application.metadata.tags ?? [] })));
    })().catch((e: Error) => setError(e.message));
  }, []);
  const shown = useMemo(() => {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    return (entries ?? []).filter((e) => {
      const text = [
        e.summary.title,
        e.summary.name,
        e.summary.description,
        e.summary.applicationType,
        ...e.tags,
      ]
        .join(' ')
        .toLowerCase();
      return words.every((w) => text.includes(w));
    });
  }, [entries, query]);
  return (
    <section>
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
      {entries === null && error === null && <p class="loading">Loading…</p>}
      {entries !== null && shown.length === 0 && <p>No application matches “{query}”.</p>}
      <ul class="apps">
        {shown.map(({ summary, tags }) => (
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
              {tags.map((t) => (
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
