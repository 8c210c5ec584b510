/**
 * Kubernetes and Volcano objects as plain typed data (the subset ucompute emits and reads).
 * Field names are the API's own; `../shared/fixtures/` holds the schemas they are checked against.
 */

export type Labels = Record<string, string>;

export interface ObjectMeta {
  name: string;
  namespace?: string;
  labels?: Labels;
  annotations?: Record<string, string>;
}

export interface KubernetesObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { configMapKeyRef?: { name: string; key: string } };
}

export interface VolumeMount {
  name: string;
  mountPath: string;
  subPath?: string;
  readOnly?: boolean;
}

/** Quantities: the API takes int-or-string ("500m", "4Gi", or a plain number). */
export type Quantity = string | number;

export interface ResourceList {
  cpu?: Quantity;
  memory?: Quantity;
  [resource: string]: Quantity | undefined;
}

export interface SeccompProfile {
  type: 'RuntimeDefault' | 'Localhost' | 'Unconfined';
  localhostProfile?: string;
}

export interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  runAsGroup?: number;
  allowPrivilegeEscalation?: boolean;
  privileged?: boolean;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: SeccompProfile;
  procMount?: 'Default' | 'Unmasked';
}

export interface ContainerPort {
  name?: string;
  containerPort: number;
  protocol?: 'TCP' | 'UDP' | 'SCTP';
}

export interface Container {
  name: string;
  image: string;
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  command?: string[];
  args?: string[];
  workingDir?: string;
  env?: EnvVar[];
  ports?: ContainerPort[];
  resources?: { requests?: ResourceList; limits?: ResourceList };
  volumeMounts?: VolumeMount[];
  securityContext?: SecurityContext;
}

export interface Volume {
  name: string;
  emptyDir?: { medium?: 'Memory' | ''; sizeLimit?: string };
  persistentVolumeClaim?: { claimName: string; readOnly?: boolean };
  hostPath?: { path: string; type?: string };
  configMap?: { name: string; items?: { key: string; path: string }[]; defaultMode?: number };
  secret?: { secretName: string; items?: { key: string; path: string }[]; defaultMode?: number };
}

export interface Toleration {
  key?: string;
  operator?: 'Equal' | 'Exists';
  value?: string;
  effect?: string;
}

export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  volumes?: Volume[];
  restartPolicy?: 'Always' | 'OnFailure' | 'Never';
  /** Seconds a pod may be active (from its start, restarts included) before it is killed and Failed. */
  activeDeadlineSeconds?: number;
  automountServiceAccountToken?: boolean;
  enableServiceLinks?: boolean;
  hostname?: string;
  subdomain?: string;
  hostAliases?: { ip: string; hostnames: string[] }[];
  nodeSelector?: Record<string, string>;
  tolerations?: Toleration[];
  runtimeClassName?: string;
  imagePullSecrets?: { name: string }[];
  schedulerName?: string;
  priorityClassName?: string;
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  /** false: the pod's own user namespace, its root an unprivileged id on the node. */
  hostUsers?: boolean;
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    runAsGroup?: number;
    fsGroup?: number;
    seccompProfile?: SeccompProfile;
  };
}

export interface PodTemplateSpec {
  metadata?: { name?: string; labels?: Labels; annotations?: Record<string, string> };
  spec: PodSpec;
}

// Volcano: batch.volcano.sh/v1alpha1 Job.

export type VolcanoEvent =
  | '*'
  | 'PodFailed'
  | 'PodEvicted'
  | 'PodPending'
  | 'Unknown'
  | 'TaskCompleted'
  | 'TaskFailed'
  | 'JobUpdated';

export type VolcanoAction =
  | 'AbortJob'
  | 'RestartJob'
  | 'RestartTask'
  | 'RestartPod'
  | 'TerminateJob'
  | 'CompleteJob'
  | 'ResumeJob';

export interface LifecyclePolicy {
  action: VolcanoAction;
  event?: VolcanoEvent;
  events?: VolcanoEvent[];
  exitCode?: number;
  timeout?: string;
}

export interface TaskSpec {
  name: string;
  replicas: number;
  minAvailable?: number;
  template: PodTemplateSpec;
  policies?: LifecyclePolicy[];
  maxRetry?: number;
  /** Pods of this task are created once these tasks' pods run (`any`: once one of them does). */
  dependsOn?: { name: string[]; iteration?: 'any' | 'all' };
}

export type VolcanoJobPhase =
  | 'Pending'
  | 'Aborting'
  | 'Aborted'
  | 'Running'
  | 'Restarting'
  | 'Completing'
  | 'Completed'
  | 'Terminating'
  | 'Terminated'
  | 'Failed';

export interface VolcanoJob extends KubernetesObject {
  apiVersion: 'batch.volcano.sh/v1alpha1';
  kind: 'Job';
  spec: {
    schedulerName?: string;
    minAvailable?: number;
    minSuccess?: number;
    queue?: string;
    maxRetry?: number;
    priorityClassName?: string;
    ttlSecondsAfterFinished?: number;
    plugins?: Record<string, string[]>;
    policies?: LifecyclePolicy[];
    tasks: TaskSpec[];
  };
  status?: {
    state?: { phase?: VolcanoJobPhase; reason?: string; message?: string };
    minAvailable?: number;
    pending?: number;
    running?: number;
    succeeded?: number;
    failed?: number;
    retryCount?: number;
  };
}

export interface VolcanoQueue extends KubernetesObject {
  apiVersion: 'scheduling.volcano.sh/v1beta1';
  kind: 'Queue';
  spec: { weight?: number; reclaimable?: boolean; capability?: ResourceList };
}

// Core and networking companions.

export interface Namespace extends KubernetesObject {
  apiVersion: 'v1';
  kind: 'Namespace';
}

export interface ServicePort {
  name?: string;
  port: number;
  targetPort?: number | string;
  protocol?: 'TCP' | 'UDP';
  /** A NodePort Service's port on every node (given by the API server when left out). */
  nodePort?: number;
}

export interface Service extends KubernetesObject {
  apiVersion: 'v1';
  kind: 'Service';
  spec: {
    type?: 'ClusterIP' | 'LoadBalancer' | 'NodePort';
    clusterIP?: string;
    selector?: Labels;
    ports?: ServicePort[];
    publishNotReadyAddresses?: boolean;
  };
}

export interface LabelSelector {
  matchLabels?: Labels;
}

export interface NetworkPolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: { cidr: string; except?: string[] };
}

export interface NetworkPolicyPort {
  protocol?: 'TCP' | 'UDP';
  port?: number | string;
}

export interface NetworkPolicy extends KubernetesObject {
  apiVersion: 'networking.k8s.io/v1';
  kind: 'NetworkPolicy';
  spec: {
    podSelector: LabelSelector;
    policyTypes: ('Ingress' | 'Egress')[];
    ingress?: { from?: NetworkPolicyPeer[]; ports?: NetworkPolicyPort[] }[];
    egress?: { to?: NetworkPolicyPeer[]; ports?: NetworkPolicyPort[] }[];
  };
}

export interface ConfigMap extends KubernetesObject {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  data: Record<string, string>;
}

export interface Secret extends KubernetesObject {
  apiVersion: 'v1';
  kind: 'Secret';
  type?: string;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

export type Companion = Namespace | VolcanoQueue | Service | NetworkPolicy | ConfigMap | Secret;

/** Where users reach a job's sshd: `ssh ucloud@<host> -p <port>`. */
export interface SshEndpoint {
  host: string;
  port: number;
}
