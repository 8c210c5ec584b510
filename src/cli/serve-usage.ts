import { ADMIN_TOKEN_FILE, ADMIN_USER, DEFAULT_PORT } from './defaults.ts';

// In a file of its own: the shell's completion reads it without loading the server and backends.
export const SERVE_USAGE = `Usage: ucompute serve [options]

Starts the service. With no configuration it runs on embedded defaults: the local backend, SQLite
in the data folder, the example catalogue and products, and one admin user "${ADMIN_USER}" whose
token is written to <data-dir>/${ADMIN_TOKEN_FILE} (the CLI reads it from there).

Options:
  --config FILE       YAML configuration (see README)
  --port N            listen on this port (default ${DEFAULT_PORT}; 0 picks a free one)
  --host HOST         listen address (default 127.0.0.1)
  --public-url URL    where people reach this service, an origin such as https://compute.example.org
                      (configuration server.publicUrl; default: the listen address, a loopback one
                      named localhost). Sign-in and session links are built from it, never from a
                      request's Host; over https the web interface's cookie is Secure and
                      __Host-ucompute_session
  --data-dir DIR      data folder (default $UCOMPUTE_DATA_DIR, /var/lib/ucompute as root, else ~/.local/share/ucompute)
  --store URL         keep jobs, users and accounting in PostgreSQL (postgres://user@host/db) instead
                      of SQLite in the data folder (configuration \`store: {postgres: {url}}\`).
                      Replicas on one database all serve; the one holding the lease runs the
                      backend loop, and exits once another took it over (docs/kubernetes.md)
  --apps DIR          catalogue folder; repeat it for several, read as one catalogue.
                      A change to a file under them reloads the catalogue (no restart); a
                      change that does not load is logged and the catalogue in use stays
  --products FILE     products YAML
  --backend NAME      local (default: jobs run on this machine), kubernetes, or dry (runs nothing);
                      kubernetes uses the in-cluster service account, kubernetes.kubeconfig,
                      $KUBECONFIG or ~/.kube/config, and says which cluster, context and
                      namespace it uses

UCloud provider mode (configuration \`mode: ucloud-provider\`, docs/ucloud-provider.md): a UCloud
Core drives ucompute as its compute provider. Core is then the source of jobs, owners and credits;
ucompute's own users, wallets and end-user job API are off (the admin token still reads jobs and
/metrics). The configuration's \`ucloud\` section says:
  providerId          the provider's id at Core (its routes are /ucloud/<providerId>/jobs…)
  coreUrl             Core's base URL
  refreshTokenFile    the refresh token Core issued for the provider
  corePublicKeyFile   Core's public key for the provider (base64 DER as UCloud hands it out, or PEM)
  publicUrl           where browsers reach this ucompute (session links, terminals)
  legacyChargeCredits also charge through jobs/control/chargeCredits (Kotlin Core); default false
  batchSize           most updates or usage reports in one call to Core (1-1000); default 500
  concurrentCalls     calls to Core under way at once, a job's updates in one (1-16); default 4`;
