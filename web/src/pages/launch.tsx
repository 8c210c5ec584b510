import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, getJson, idempotencyKey, postJson, session } from '../api.ts';
import { ErrorAlert } from '../components/error-alert.tsx';
import { type ChosenFolder, FoldersField } from '../components/folders-field.tsx';
import { ParameterField } from '../components/parameter-field.tsx';
import { fieldOf } from '../field-of.ts';
import { credits, estimatedCost, number, pricePerHour } from '../format.ts';
import { markdownHtml } from '../markdown.ts';
import { initialRaw, parameterValue, type RawValue } from '../parameter-values.ts';
import { Link, navigate } from '../router.tsx';
import type { Application, Duration, Job, Product, Tool, Wallet } from '../types.ts';
import { workspace, workspaceAccount, workspaceDrive } from '../workspace.ts';

interface Loaded {
  application: Application;
  tool: Tool;
  products: Product[];
  wallets: Wallet[];
  peers: Job[];
}

const DEFAULT_TIME: Duration = { hours: 1, minutes: 0, seconds: 0 };

/** The launch form, generated from the application's parameters. */
export function LaunchPage({ name }: { name: string }) {
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [raw, setRaw] = useState<Record<string, RawValue>>({});
  const [productId, setProductId] = useState('');
  const [replicas, setReplicas] = useState('1');
  const [hours, setHours] = useState('1');
  const [minutes, setMinutes] = useState('0');
  const [jobName, setJobName] = useState('');
  const [folders, setFolders] = useState<ChosenFolder[]>([]);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    (async () => {
      const [app, products, wallets, running] = await Promise.all([
        getJson<{ application: Application; tool: Tool }>('/api/apps/retrieve', { name }),
        getJson<{ items: Product[] }>('/api/products'),
        getJson<{ items: Wallet[] }>('/api/accounting/wallets'),
        getJson<{ items: Job[] }>('/api/jobs/browse', { filterState: 'RUNNING', itemsPerPage: 250 }),
      ]);
      const time = app.tool.defaultTimeAllocation ?? DEFAULT_TIME;
      setRaw(Object.fromEntries(app.application.invocation.parameters.map((p) => [p.name, initialRaw(p)])));
      setProductId(products.items[0]?.id ?? '');
      setReplicas(String(app.tool.defaultNumberOfNodes));
      setHours(String(time.hours));
      setMinutes(String(time.minutes));
      setLoaded({ ...app, products: products.items, wallets: wallets.items, peers: running.items });
    })().catch((e: Error) => setLoadError(e.message));
  }, [name]);

  const product = loaded?.products.find((p) => p.id === productId);
  const duration: Duration = { hours: Number(hours) || 0, minutes: Number(minutes) || 0, seconds: 0 };
  const replicaCount = Math.max(1, Math.floor(Number(replicas)) || 1);
  const estimate = product ? estimatedCost(product, replicaCount, duration) : 0;
  const user = session.value!.user;
  const account = workspaceAccount(user);
  const balance = useMemo(
    () => loaded?.wallets.find((w) => w.owner === account && w.category === product?.category)?.balance,
    [loaded, product],
  );

  if (loadError !== null) return <p class="error">{loadError}</p>;
  if (loaded === null) return <p class="loading">Loading…</p>;
  const { application, products, peers } = loaded;
  const multiNode = application.invocation.allowMultiNode;

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setErrors({});
    const parameters = Object.fromEntries(
      application.invocation.parameters.flatMap((p) => {
        const value = parameterValue(p, raw[p.name] ?? '');
        return value === undefined ? [] : [[p.name, value]];
      }),
    );
    const item = {
      application: { name: application.metadata.name, version: application.metadata.version },
      product: { id: product?.id ?? '', category: product?.category ?? '' },
      parameters,
      timeAllocation: { hours: Number(hours), minutes: Number(minutes), seconds: 0 },
      ...(multiNode ? { replicas: Number(replicas) } : {}),
      ...(folders.length > 0 ? { resources: folders.map((f) => ({ type: 'file', ...f })) } : {}),
      ...(jobName.trim() !== '' ? { name: jobName.trim() } : {}),
    };
    try {
      // Keyed, so that a request the browser dropped (ERR_NETWORK_CHANGED when the machine's network
      // changes) is sent again without starting the job twice.
      const created = await postJson<{ responses: { id: string }[] }>(
        '/api/jobs',
        { items: [item] },
        { 'idempotency-key': idempotencyKey() },
      );
      navigate(`/jobs/${created.responses[0]!.id}`);
    } catch (e) {
      const found: Record<string, string> = {};
      if (e instanceof ApiError && e.issues.length > 0) {
        for (const issue of e.issues) {
          const field = fieldOf(issue.path);
          found[field] = found[field] === undefined ? issue.message : `${found[field]}; ${issue.message}`;
        }
      } else {
        found.form = (e as Error).message;
      }
      setErrors(found);
      setBusy(false);
      // Move the keyboard to the first field in error.
      requestAnimationFrame(() =>
        (
          document.querySelector(
            '.field.invalid input, .field.invalid select, .field.invalid textarea',
          ) as HTMLElement | null
        )?.focus(),
      );
    }
  };

  const fieldError = (field: string) => <ErrorAlert id={`${field}-error`} message={errors[field]} />;

  return (
    <section class="launch">
      <p class="crumbs">
        <Link href="/">Applications</Link> › {application.metadata.title}
      </p>
      <h1>{application.metadata.title}</h1>
      {/* Rendered Markdown, sanitised by DOMPurify (markdown.ts). */}
      <div
        class="description"
        dangerouslySetInnerHTML={{ __html: markdownHtml(application.metadata.description) }}
      />
      <form onSubmit={submit} noValidate>
        <fieldset>
          <legend>Parameters</legend>
          {application.invocation.parameters.length === 0 && (
            <p class="muted">This application has no parameters.</p>
          )}
          {application.invocation.parameters.map((p) => (
            <ParameterField
              key={p.name}
              parameter={p}
              raw={raw[p.name] ?? ''}
              error={errors[`param:${p.name}`]}
              peers={peers}
              onChange={(value) => setRaw({ ...raw, [p.name]: value })}
            />
          ))}
          <p class="hint">
            <span class="required">*</span> required
          </p>
        </fieldset>
        {application.invocation.allowAdditionalMounts && (
          <FoldersField
            drive={workspaceDrive(user)}
            folders={folders}
            error={errors.resources}
            onChange={setFolders}
          />
        )}
        <fieldset>
          <legend>Resources</legend>
          <div class={`field${errors.product ? ' invalid' : ''}`}>
            <span class="label" id="product-label">
              Machine type
            </span>
            <div class="products" role="radiogroup" aria-labelledby="product-label">
              {products.map((p) => (
                <label key={p.id} class={`product${p.id === productId ? ' chosen' : ''}`}>
                  <input
                    type="radio"
                    name="product"
                    value={p.id}
                    checked={p.id === productId}
                    onChange={() => setProductId(p.id)}
                  />
                  <strong>{p.id}</strong>
                  <span>
                    {p.cpu} vCPU · {p.memoryInGigs} GB{p.gpu ? ` · ${p.gpu} GPU` : ''}
                  </span>
                  <span class="price">{number(pricePerHour(p))} credits/h</span>
                </label>
              ))}
            </div>
            {fieldError('product')}
          </div>
          {multiNode && (
            <div class={`field${errors.replicas ? ' invalid' : ''}`}>
              <label for="replicas">Nodes (replicas)</label>
              <input
                id="replicas"
                type="number"
                min={1}
                step={1}
                value={replicas}
                onInput={(e) => setReplicas(e.currentTarget.value)}
                aria-invalid={errors.replicas !== undefined}
              />
              {fieldError('replicas')}
            </div>
          )}
          <div class={`field${errors.timeAllocation ? ' invalid' : ''}`}>
            <fieldset class="time">
              <legend>Time allocation</legend>
              <TimePart
                unit="hours"
                value={hours}
                onInput={setHours}
                invalid={errors.timeAllocation !== undefined}
              />
              <TimePart
                unit="minutes"
                max={59}
                value={minutes}
                onInput={setMinutes}
                invalid={errors.timeAllocation !== undefined}
              />
            </fieldset>
            {product?.maxTimeAllocationHours !== undefined && (
              <p class="hint">At most {product.maxTimeAllocationHours} hours on this machine type.</p>
            )}
            {fieldError('timeAllocation')}
          </div>
          <div class={`field${errors.name ? ' invalid' : ''}`}>
            <label for="job-name">Job name (optional)</label>
            <input
              id="job-name"
              type="text"
              value={jobName}
              onInput={(e) => setJobName(e.currentTarget.value)}
            />
            {fieldError('name')}
          </div>
        </fieldset>
        <div class="estimate" aria-live="polite">
          Estimated cost: <strong>{credits(estimate)}</strong> at most, paid by{' '}
          {workspace.value === '' ? 'you' : `project ${workspace.value}`}
          <span class="muted">
            {' '}
            ·{' '}
            {balance !== undefined
              ? `${credits(balance)} left`
              : `no allocation for ${product?.category ?? 'this machine type'}`}
          </span>
        </div>
        <ErrorAlert message={errors.form} />
        <button type="submit" class="primary" disabled={busy}>
          Submit
        </button>
      </form>
    </section>
  );
}

/** One number of the time allocation (hours or minutes), labelled by its unit. */
function TimePart(props: {
  unit: string;
  max?: number;
  value: string;
  onInput: (value: string) => void;
  invalid: boolean;
}) {
  return (
    <label>
      <input
        type="number"
        min={0}
        max={props.max}
        step={1}
        value={props.value}
        onInput={(e) => props.onInput(e.currentTarget.value)}
        aria-invalid={props.invalid}
      />{' '}
      {props.unit}
    </label>
  );
}
