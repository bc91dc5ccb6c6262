/*
 * train_epoch.h - one training epoch of snn-train (app/train_epoch.c), which
 * examples/snn_train.c runs epoch after epoch between its evaluations.
 */
#ifndef SNN_APP_TRAIN_EPOCH_H
#define SNN_APP_TRAIN_EPOCH_H

#include "app/train_checkpoint.h"
#include "app/train_options.h"
#include "snn.h"

/* Trains `run` over the batches `loader` has left of epoch `epoch` (all of them, or the rest of
 * a resumed epoch), adding to *st: images, the loss and accuracy of the batches whose loss was
 * read (every o->log_every steps), the gradient norms with --clip-grad, the seconds. Stops
 * early, with SNN_OK, where a signal asks (st->batches says how far it came), where the loss is
 * not finite (st->diverged) or where a --checkpoint-every checkpoint into out_dir could not be
 * written (st->save_failed). `images`: the training split's size, for the checkpoints. dist:
 * this rank of a data-parallel run, or NULL. Any other failure: its status, the error set. */
snn_status train_epoch(train_state *run, const snn_schedule *schedule, snn_loader *loader,
                       const train_options *o, snn_device device, snn_dist *dist, int64_t epoch,
                       epoch_stats *st, const char *out_dir, int64_t images);

#endif /* SNN_APP_TRAIN_EPOCH_H */
