/** Errors a caller can act on, each with the HTTP status it maps to. */
export class ServiceError extends Error {
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export const notFound = (what: string) => new ServiceError(404, `${what} was not found`);
export const forbidden = (message: string) => new ServiceError(403, message);
export const conflict = (message: string) => new ServiceError(409, message);
export const paymentRequired = (message: string) => new ServiceError(402, message);
export const badRequest = (message: string) => new ServiceError(400, message);
/** 410: what was asked for existed and was removed for good (a job's logs past retention). */
export const logsGone = (message: string) => new ServiceError(410, message);

/** SQLite's SQLITE_FULL: the database could not grow (the disk, or its page limit, is full). */
const SQLITE_FULL = 13;

/** Whether `e` says the disk is full: SQLite's SQLITE_FULL or the file system's ENOSPC. */
export function isDiskFull(e: unknown): boolean {
  const { code, errcode } = (e ?? {}) as { code?: unknown; errcode?: unknown };
  return code === 'ENOSPC' || errcode === SQLITE_FULL;
}

/** 507: the request was refused whole because the service's disk is full. */
export const insufficientStorage = () =>
  new ServiceError(
    507,
    "the service's disk is full, so nothing was changed; try again once an operator has freed space",
  );
