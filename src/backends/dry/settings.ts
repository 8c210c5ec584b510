import { type Static, Type } from '@sinclair/typebox';
import { closed } from '../../model/schema.ts';

/** The dry backend's settings (`dry` in the configuration). */
export const DrySettings = Type.Object(
  {
    /** How long a dry job runs before it succeeds; null: until cancelled. Default 0. */
    runForMs: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])),
  },
  closed,
);
export type DrySettings = Static<typeof DrySettings>;
