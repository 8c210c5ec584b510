import { signal } from '@preact/signals';
import type { ComponentChildren, JSX } from 'preact';

// Client-side routes on the History API: the server answers index.html for every such path.

/** The path and query the interface shows. */
export const route = signal(window.location.pathname + window.location.search);

window.addEventListener('popstate', () => {
  route.value = window.location.pathname + window.location.search;
});

export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  route.value = to;
  window.scrollTo(0, 0);
}

/** The query parameters of the current location. */
export function queryOf(): URLSearchParams {
  return new URLSearchParams(route.value.split('?')[1] ?? '');
}

export function pathOf(): string {
  return route.value.split('?')[0] ?? '/';
}

type LinkProps = { href: string; children: ComponentChildren } & Omit<
  JSX.HTMLAttributes<HTMLAnchorElement>,
  'href'
>;

/** An ordinary link (opens in a new tab, keyboard focus), followed in place on a plain click. */
export function Link({ href, children, ...rest }: LinkProps) {
  const onClick = (event: MouseEvent) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(href);
  };
  return (
    <a href={href} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}
