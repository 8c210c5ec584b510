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
