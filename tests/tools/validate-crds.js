#!/usr/bin/env node
// Validates cert-manager objects against cert-manager's own CRD schemas (cert-manager.io/v1,
// as packaged by @kubernetes-models/cert-manager): types, enums and required fields.
// Usage: node validate-cert-manager.js OBJECTS.json   (a JSON array of objects)
// Exits 1 naming every object that fails or whose kind is not a cert-manager.io/v1 kind.
"use strict";
const fs = require("fs");

const models = {
  Certificate: require("@kubernetes-models/cert-manager/cert-manager.io/v1/Certificate").Certificate,
  Issuer: require("@kubernetes-models/cert-manager/cert-manager.io/v1/Issuer").Issuer,
  ClusterIssuer: require("@kubernetes-models/cert-manager/cert-manager.io/v1/ClusterIssuer").ClusterIssuer,
};

const objects = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
let failed = 0;
for (const obj of objects) {
  const name = `${obj.kind}/${obj.metadata && obj.metadata.name}`;
  const Model = obj.apiVersion === "cert-manager.io/v1" ? models[obj.kind] : undefined;
  if (!Model) {
    console.log(`FAIL ${name}: not a cert-manager.io/v1 kind this check knows (${obj.apiVersion})`);
    failed++;
    continue;
  }
  try {
    new Model(obj).validate();
    console.log(`ok   ${name}`);
  } catch (err) {
    console.log(`FAIL ${name}: ${err.message}`);
    failed++;
  }
}
process.exit(failed === 0 && objects.length > 0 ? 0 : 1);
