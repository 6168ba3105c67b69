-- wrk script: POSTs the AdmissionReview in the file named by $BODY_FILE to every request.
-- Used by benches/tls_floor (see docs/webhook.md for running it by hand).
local path = assert(os.getenv("BODY_FILE"), "set BODY_FILE to an AdmissionReview JSON file")
local file = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"
