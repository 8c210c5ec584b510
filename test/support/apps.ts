import assert from 'node:assert/strict';
import { buildCatalog } from '../../src/catalog/catalog.ts';
import type { Application } from '../../src/model/application.ts';

const TOOL = `tool: v1
name: t
version: "1"
title: T
authors: [me]
description: d
container: debian:12
backend: DOCKER
`;

/** An application from an inline YAML v1 body (the `application`, name, tool… lines are added). */
export function appFromYaml(body: string): Application {
  const text = `${TOOL}---
application: v1
name: app
version: "1"
title: App
authors: [me]
description: d
tool: { name: t, version: "1" }
${body}`;
  const { catalog, issues } = buildCatalog([{ path: 'inline.yml', text }]);
  assert.deepEqual(issues, []);
  const found = catalog.find('app', '1');
  assert.ok(found);
  return found.application;
}
