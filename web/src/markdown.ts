import DOMPurify from 'dompurify';
import { marked } from 'marked';

/** An application's Markdown description as safe HTML: rendered, then sanitised (no scripts, no handlers). */
export function markdownHtml(text: string): string {
  const html = marked.parse(text, { async: false, gfm: true });
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true } });
}
