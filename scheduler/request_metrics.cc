#include "scheduler/request_metrics.h"

#include "scheduler/job.h"

namespace argen::scheduler {

void CountStep(Job& job, absl::Time end, absl::Duration duration, int32_t decode_batch_rows) {
  // The engine's count (the request's progress) has this step's token already.
  if (job.progress().tokens_done == 1) {
    job.prefilled = end;
    job.prefill_time = duration;
  } else {
    ++job.decode_steps;
    job.decode_batch_rows_sum += decode_batch_rows;
  }
}

RequestMetrics MeasureRequest(const Job& job, absl::Time now) {
  RequestMetrics m;
  const bool was_admitted = job.admitted != absl::InfinitePast();
  m.queue_wait = (was_admitted ? job.admitted : now) - job.accepted;
  m.prefill = job.prefill_time;
  if (job.prefilled != absl::InfinitePast()) {
    m.decode = (job.last_token != absl::InfinitePast() ? job.last_token : now) - job.prefilled;
  }
  m.vq_decode = job.vq_time;
  m.total = now - job.accepted;
  m.rows = job.batch_rows;
  m.steps = job.progress().steps;  // fewer than its tokens with parallel decoding
  m.images = job.images_sent;
  m.drafts_proposed = job.progress().drafts_proposed;
  m.drafts_accepted = job.progress().drafts_accepted;
  m.prompt_tokens = static_cast<int32_t>(job.prepared().cond_ids.size());
  m.peak_kv_bytes = was_admitted ? job.admitted_kv_bytes : 0;
  const double gen_seconds = absl::ToDoubleSeconds(m.prefill + m.decode);
  if (gen_seconds > 0) {
    m.tokens_per_second =
        static_cast<double>(job.progress().tokens_done) * job.prepared().request.num_images / gen_seconds;
  }
  if (m.total > absl::ZeroDuration()) {
    m.images_per_second = job.images_sent / absl::ToDoubleSeconds(m.total);
  }
  m.mean_batch_rows = job.decode_steps > 0 ? static_cast<double>(job.decode_batch_rows_sum) / job.decode_steps
                                           : static_cast<double>(job.batch_rows);
  return m;
}

}  // namespace argen::scheduler
