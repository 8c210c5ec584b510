import type { Container, EnvVar } from '../api/types.ts';

/**
 * Kubernetes' variable expansion in command, args and env values: `$(NAME)` becomes the variable's
 * value, `$$` a literal `$`; a name that is not defined stays as written, as the kubelet leaves it.
 */
export function expand(text: string, lookup: (name: string) => string | undefined): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c !== '$' || i + 1 >= text.length) {
      out += c;
      continue;
    }
    const next = text[i + 1];
    if (next === '$') {
      out += '$';
      i++;
    } else if (next === '(') {
      const close = text.indexOf(')', i + 2);
      if (close === -1) {
        out += text.slice(i);
        break;
      }
      const name = text.slice(i + 2, close);
      out += lookup(name) ?? `$(${name})`;
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

/**
 * A container's environment and argv as the kubelet makes them: each env value expanded with the
 * variables defined before it, then command and args with all of them. `resolve` gives the value
 * of a `valueFrom` variable (or undefined when its source is missing).
 */
export function containerProcess(
  container: Container,
  resolve: (v: EnvVar) => string | undefined,
): { env: Record<string, string>; argv: string[] } {
  const env: Record<string, string> = {};
  const lookup = (name: string) => env[name];
  for (const v of container.env ?? []) {
    const value = v.valueFrom ? resolve(v) : expand(v.value ?? '', lookup);
    if (value !== undefined) env[v.name] = value;
  }
  const argv = [...(container.command ?? []), ...(container.args ?? [])].map((a) => expand(a, lookup));
  return { env, argv };
}
