/*
 * snn.h - the umbrella header of snn.c: include this one file to use the whole library.
 *
 *   tensor/tensor.h      tensors, the two lifetimes, steps, memory, errors, random numbers
 *   autograd/autograd.h  the tape, backward, no-grad mode, gradcheck, differentiable ops
 *   neurons/neurons.h    IF, LIF, ParametricLIF, ST-BIF and their surrogate gradients
 *   nn/nn.h              layers, losses, optimizers, schedules, models, checkpoints
 *   data/data.h          Fashion-MNIST / MNIST / CIFAR readers and the batch loader
 *   sparse/sparse.h      the sparse-execution pass for spike-fed convolutions
 *
 * Headers of folders whose code has not landed are included only when they exist.
 */
#ifndef SNN_H
#define SNN_H

#include "tensor/tensor.h"
#include "autograd/autograd.h"
#if __has_include("neurons/neurons.h")
#include "neurons/neurons.h"
#endif
#if __has_include("nn/nn.h")
#include "nn/nn.h"
#endif
#if __has_include("data/data.h")
#include "data/data.h"
#endif
#if __has_include("sparse/sparse.h")
#include "sparse/sparse.h"
#endif

#endif /* SNN_H */
