/** Labels and annotations by which ucompute finds its objects again on a cluster. */
export const JOB_ID_LABEL = 'ucompute.dev/job-id';
export const OWNER_LABEL = 'ucompute.dev/owner';
export const RANK_LABEL = 'ucompute.dev/rank';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'ucompute';

export const CREATED_BY_ANNOTATION = 'ucompute.dev/created-by';
export const PROJECT_ANNOTATION = 'ucompute.dev/project';
export const MAX_TIME_ANNOTATION = 'ucompute.dev/max-time-ms';
export const CHARGE_UNITS_ANNOTATION = 'ucompute.dev/charge-units';
export const PRICE_PER_UNIT_ANNOTATION = 'ucompute.dev/price-per-unit';
export const UNIT_OF_PRICE_ANNOTATION = 'ucompute.dev/unit-of-price';
/** The operator's accounting.chargePeriodMs when the job was made; absent: the unit of price's period. */
export const CHARGE_PERIOD_ANNOTATION = 'ucompute.dev/charge-period-ms';
export const PRODUCT_ANNOTATION = 'ucompute.dev/product';
export const OUTPUT_FOLDER_ANNOTATION = 'ucompute.dev/output-folder';
export const FAIR_SHARE_WEIGHT_ANNOTATION = 'ucompute.dev/fair-share-weight';
export const WEB_PORT_ANNOTATION = 'ucompute.dev/web-port';
export const VNC_PORT_ANNOTATION = 'ucompute.dev/vnc-port';
export const PEERS_ANNOTATION = 'ucompute.dev/peers';
/** On jobs with sshEnabled: the port rank 0's sshd listens on, which gets an endpoint at start. */
export const SSH_PORT_ANNOTATION = 'ucompute.dev/ssh-port';
/** Most processes of each replica, from the product (the local backend's pids cgroup). */
export const PIDS_LIMIT_ANNOTATION = 'ucompute.dev/pids-limit';

/** Pod Security admission: the profile a namespace's pods must meet (restricted, baseline). */
export const POD_SECURITY_ENFORCE_LABEL = 'pod-security.kubernetes.io/enforce';

export const INGRESS_BANDWIDTH_ANNOTATION = 'kubernetes.io/ingress-bandwidth';
export const EGRESS_BANDWIDTH_ANNOTATION = 'kubernetes.io/egress-bandwidth';
