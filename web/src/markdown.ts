import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const escaped: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => escaped[c]!);

// Raw HTML in a description is shown as text: a description is Markdown, and HTML is where scripts hide.
const markdown = new Marked({ gfm: true, renderer: { html: ({ text }) => escapeHtml(text) } });

/** An application's Markdown description as safe HTML: rendered, then sanitised (no scripts, no handlers, no javascript: links). */
export function markdownHtml(text: string): string {
  const html = markdown.parse(text, { async: false });
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true } });
}
