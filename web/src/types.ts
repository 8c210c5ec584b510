// The shapes of the public API as the interface reads them (see /openapi.json): only the fields used.
// Where the server has a plain type of the same shape, it is imported (type-only: the bundle holds
// no server code); job states and outcomes are the server's plain constants (model/job-states.ts,
// model/outcome-kinds.ts: no schemas).

export type { Wallet } from '../../src/jobs/access.ts';

import type { JobState } from '../../src/model/job-states.ts';
import type { JobOutcome } from '../../src/model/outcome.ts';
import type { OutcomeKind } from '../../src/model/outcome-kinds.ts';

export { FINAL_STATES, JOB_STATES } from '../../src/model/job-states.ts';
export { OUTCOME_KINDS } from '../../src/model/outcome-kinds.ts';
export type { FileEntry } from '../../src/storage/files.ts';
export type { JobOutcome, JobState, OutcomeKind };

export interface User {
  username: string;
  admin: boolean;
  projects?: { id: string; title?: string; role?: string }[];
}

export interface Session {
  user: User;
  csrfToken: string;
}

export interface Duration {
  hours: number;
  minutes: number;
  seconds: number;
}

export type ParameterValue =
  | { type: 'file'; path: string; readOnly?: boolean }
  | { type: 'boolean'; value: boolean }
  | { type: 'text'; value: string }
  | { type: 'textarea'; value: string }
  | { type: 'integer'; value: number }
  | { type: 'floating_point'; value: number }
  | { type: 'peer'; hostname: string; jobId: string }
  | { type: 'license_server'; id: string }
  | { type: 'network'; id: string }
  | { type: 'ingress'; id: string }
  // A Workflow's job script (UCloud's WorkflowSpecification); its inputs are given through the API.
  | { type: 'workflow'; specification: { job?: string | null; inputs?: unknown[] } };

interface ParameterCommon {
  name: string;
  optional: boolean;
  title: string;
  description: string;
  defaultValue?: ParameterValue;
}
export type Parameter = ParameterCommon &
  (
    | { type: 'input_file' | 'input_directory' | 'text' | 'textarea' | 'ingress' | 'network_ip' }
    | { type: 'integer' | 'floating_point'; min?: number; max?: number; step?: number; unitName?: string }
    | { type: 'boolean'; trueValue: string; falseValue: string }
    | { type: 'enumeration'; options: { name: string; value: string }[] }
    | { type: 'peer'; suggestedApplication?: string }
    | { type: 'license_server'; tagged: string[] }
    | { type: 'workflow' }
  );

export type ApplicationType = 'BATCH' | 'VNC' | 'WEB';

export interface AppSummary {
  name: string;
  version: string;
  title: string;
  description: string;
  tags: string[];
  applicationType: ApplicationType;
  parameters: { name: string; type: string; title: string; optional: boolean }[];
}

export interface Application {
  metadata: {
    name: string;
    version: string;
    title: string;
    description: string;
    tags: string[];
    authors: string[];
  };
  invocation: {
    parameters: Parameter[];
    applicationType: ApplicationType;
    allowMultiNode: boolean;
    allowAdditionalMounts: boolean;
    web?: { port: number };
    vnc?: { port: number };
  };
}

export interface Tool {
  defaultNumberOfNodes: number;
  defaultTimeAllocation?: Duration;
}

export type UnitOfPrice = 'CREDITS_PER_MINUTE' | 'CREDITS_PER_HOUR' | 'CREDITS_PER_DAY';

export interface Product {
  id: string;
  category: string;
  cpu: number;
  memoryInGigs: number;
  gpu?: number;
  pricePerUnit: number;
  unitOfPrice?: UnitOfPrice;
  pricedPer?: 'vCPU' | 'GPU';
  maxTimeAllocationHours?: number;
  description?: string;
}

export interface JobUpdate {
  timestamp: number;
  state?: JobState;
  status?: string;
  outputFolder?: string;
  newTimeAllocation?: number;
}

export interface Job {
  id: string;
  owner: { createdBy: string; project?: string };
  specification: {
    application: { name: string; version: string };
    product: { id: string; category: string };
    name?: string;
    replicas?: number;
    parameters?: Record<string, ParameterValue>;
    resources?: ParameterValue[];
    timeAllocation?: Duration | null;
  };
  status: {
    state: JobState;
    startedAt?: number;
    expiresAt?: number;
    exitCode?: Record<string, number>;
    outcome?: JobOutcome;
    resolvedApplication?: { metadata: Application['metadata']; invocation: Application['invocation'] };
    resolvedSupport?: {
      support: { docker: { web: boolean; vnc: boolean; terminal: boolean; timeExtension: boolean } };
    };
  };
  updates: JobUpdate[];
  createdAt: number;
  output: { outputFolder?: string };
  billing: { creditsCharged: number; pricePerUnit: number };
}

export interface FollowMessage {
  initialJob?: Job;
  updates: JobUpdate[];
  log: { rank: number; stdout?: string; stderr?: string }[];
  newStatus?: Job['status'];
}

export interface UsageItem {
  owner: string;
  category: string;
  start: number;
  credits: number;
}

export interface Utilization {
  capacity: { cpu: number; memory: number };
  usedCapacity: { cpu: number; memory: number };
  queueStatus: { running: number; pending: number };
}
