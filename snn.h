/**
 * @file
 * snn.h - the umbrella header of snn.c: include this one file to use the whole library.
 *
 *     tensor/tensor.h      tensors, the two lifetimes, steps, memory, errors, random numbers
 *     tensor/version.h     SNN_VERSION_MAJOR/MINOR/PATCH and snn_version()
 *     autograd/autograd.h  the tape, backward, no-grad mode, gradcheck, differentiable ops
 *     neurons/neurons.h    IF, LIF, ParametricLIF, ST-BIF and their surrogate gradients
 *     nn/nn.h              layers, models, optimizers, schedules, checkpoints, SVG charts
 *     data/data.h          Fashion-MNIST / MNIST / CIFAR / event-camera readers, the batch loader
 *     sparse/sparse.h      the sparse-execution pass for spike-fed convolutions
 *     distributed/dist.h          data-parallel training over several processes (NCCL, or TCP on CPUs)
 *
 * Not included here: tensor/cuda_options.h (the CUDA backend's knobs, in CUDA builds) and
 * nir/nir.h (NIR export / import, only in builds with HDF5, which define SNN_WITH_NIR for their
 * users); include those on their own.
 *
 * docs/architecture.md is the reading guide. Installed, the headers sit under include/snn/
 * and a program includes `<snn/snn.h>` (docs/api.md).
 */
#ifndef SNN_H
#define SNN_H

#include "tensor/tensor.h"
#include "tensor/version.h"
#include "autograd/autograd.h"
#include "neurons/neurons.h"
#include "nn/nn.h"
#include "data/data.h"
#include "sparse/sparse.h"
#include "distributed/dist.h"

#endif /* SNN_H */
