import type { ResolvedApplication } from '../model/application.ts';
import type { Issue } from '../model/errors.ts';
import type { SourceText } from './lenient-read.ts';
import { normaliseDocument, type V1Document } from './yaml-v1.ts';
import { readApplicationV2 } from './yaml-v2.ts';

/** A catalogue document: a YAML v1 application or tool, or an `application: v2` document, which is its own tool. */
export type CatalogDocument = V1Document | { kind: 'application-v2'; resolved: ResolvedApplication };

/** Reads one YAML document in the format it declares; problems are returned, never thrown. */
export function readDocument(
  doc: unknown,
  sourceText: SourceText,
): { document?: CatalogDocument; issues: Issue[]; warnings: Issue[] } {
  if (typeof doc === 'object' && doc !== null && (doc as Record<string, unknown>).application === 'v2') {
    const { resolved, issues, warnings } = readApplicationV2(doc as Record<string, unknown>, sourceText);
    return { ...(resolved ? { document: { kind: 'application-v2', resolved } } : {}), issues, warnings };
  }
  return normaliseDocument(doc, sourceText);
}
