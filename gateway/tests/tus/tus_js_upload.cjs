// Uploads a file with tus-js-client under Node, for gateway/tests/tus.rs.
//
//   node tus_js_upload.cjs start  ENDPOINT FILE STORAGE CHUNK ABORT_AT
//   node tus_js_upload.cjs resume ENDPOINT FILE STORAGE CHUNK
//
// `start` uploads FILE in CHUNK-byte PATCHes and calls upload.abort() as
// soon as ABORT_AT bytes have gone out (in the middle of a PATCH, most
// likely). `resume` starts a new Upload of the same file, finds the first
// one through findPreviousUploads() in the file-based URL storage STORAGE,
// resumes it with resumeFromPreviousUpload() and runs it to the end.
//
// CHUNK `default` gives tus-js-client no chunkSize at all: its default,
// unlimited, so the whole rest of the file goes in one PATCH. With
// TUS_JS_PACE=BYTES_PER_SECOND in the environment, every PATCH body is
// paced to that rate (a transform between the file and the request, in an
// httpStack around the default one), so an abort lands where it is meant
// to on loopback.
//
// Prints one JSON object: the upload's url, the offset of every PATCH it
// sent (`patch_offsets`), the server's offset after its last answered PATCH
// (`accepted`), the body bytes that went out (`sent`), how many previous
// uploads it found, and `error` if it failed (exit status 3).
//
// tus-js-client is found through NODE_PATH (scripts/install-test-deps.sh
// puts it under .tools/node/node_modules).

'use strict'

const fs = require('node:fs')
const { Transform } = require('node:stream')
const tus = require('tus-js-client')

const [mode, endpoint, file, storage, chunkArg, abortArg] = process.argv.slice(2)
const size = fs.statSync(file).size
const report = { mode, url: null, patch_offsets: [], accepted: 0, sent: 0, previous: null }

// Passes bytes on no faster than `rate` bytes a second on average.
class Paced extends Transform {
  constructor(rate) {
    super()
    this.rate = rate
    this.started = null
    this.passed = 0
  }

  _transform(chunk, _encoding, callback) {
    if (this.started === null) this.started = Date.now()
    this.passed += chunk.length
    this.push(chunk)
    const due = this.started + (this.passed / this.rate) * 1000
    setTimeout(callback, Math.max(0, due - Date.now()))
  }
}

// The default HTTP stack, its request bodies paced to `rate`.
function pacedHttpStack(rate) {
  const inner = new tus.DefaultHttpStack()
  return {
    createRequest(method, url) {
      const request = inner.createRequest(method, url)
      const send = request.send.bind(request)
      request.send = (body) => {
        if (body != null && typeof body.pipe === 'function') {
          const paced = body.pipe(new Paced(rate))
          // The default stack sends Content-Length from the body's size.
          paced.size = body.size
          return send(paced)
        }
        return send(body)
      }
      return request
    },
    getName() {
      return 'PacedNodeHttpStack'
    },
  }
}

const pace = Number(process.env.TUS_JS_PACE || 0)
const options = {}
if (chunkArg !== 'default') options.chunkSize = Number(chunkArg)
if (pace > 0) options.httpStack = pacedHttpStack(pace)
const parallel = Number(process.env.TUS_JS_PARALLEL || 0)
if (parallel > 1) options.parallelUploads = parallel

function finish(status) {
  process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(status))
}

const upload = new tus.Upload(fs.createReadStream(file), {
  ...options,
  endpoint,
  ...(parallel > 1 ? {} : { uploadSize: size }),
  metadata: { filename: 'js.bin', filetype: 'application/octet-stream' },
  urlStorage: new tus.FileUrlStorage(storage),
  // Resuming is the point: no retries that would hide a failure.
  retryDelays: null,
  onBeforeRequest(req) {
    if (req.getMethod() === 'PATCH') {
      report.patch_offsets.push(Number(req.getHeader('Upload-Offset')))
    }
  },
  onProgress(bytesSent) {
    // bytesSent counts from 0 for a new upload and from the resumed offset
    // for a resumed one; what left this run is the rest.
    // A resumed upload reports its offset once HEAD answers, before any
    // PATCH: nothing went out yet.
    if (report.patch_offsets.length > 0) {
      report.sent = Math.max(report.sent, bytesSent - report.patch_offsets[0])
    }
    if (mode === 'start' && bytesSent >= Number(abortArg) && !report.aborted) {
      report.aborted = bytesSent
      report.url = upload.url
      upload.abort().then(() => setTimeout(() => finish(0), 200))
    }
  },
  onChunkComplete(_chunk, bytesAccepted) {
    report.accepted = bytesAccepted
  },
  onSuccess() {
    report.url = upload.url
    finish(0)
  },
  onError(error) {
    report.url = upload.url
    report.error = String(error)
    finish(3)
  },
})

if (mode === 'start') {
  upload.start()
} else {
  upload
    .findPreviousUploads()
    .then((previous) => {
      report.previous = previous.length
      if (previous.length === 0) {
        report.error = 'findPreviousUploads() found nothing to resume'
        finish(3)
        return
      }
      upload.resumeFromPreviousUpload(previous[0])
      upload.start()
    })
    .catch((error) => {
      report.error = String(error)
      finish(3)
    })
}
