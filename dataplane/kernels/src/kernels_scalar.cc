// The portable variant (baseline x86-64 / any target): plain loops over scalar_ops.h. Also the
// home of the public scalar conversions.
#include "kernels_internal.h"
#include "scalar_ops.h"

namespace sumcast::kernels {

float half_to_float(uint16_t h) { return internal::half_to_float_inline(h); }
uint16_t float_to_half(float f) { return internal::float_to_half_inline(f); }
float bf16_to_float(uint16_t b) { return internal::bf16_to_float_inline(b); }
uint16_t float_to_bf16(float f) { return internal::float_to_bf16_inline(f); }

namespace internal {

static_assert(static_cast<int>(wire::Dtype::kFp32) == 0 && static_cast<int>(wire::Dtype::kFp16) == 1 &&
              static_cast<int>(wire::Dtype::kBf16) == 2 && static_cast<int>(wire::Dtype::kInt32) == 3 &&
              static_cast<int>(wire::Dtype::kFp64) == 4 && wire::kDtypeCount == 5);
static_assert(static_cast<int>(wire::ReduceOp::kSum) == 0 && static_cast<int>(wire::ReduceOp::kMin) == 1 &&
              static_cast<int>(wire::ReduceOp::kMax) == 2 && wire::kReduceOpCount == 3);

// Rows in wire::Dtype order, columns in wire::ReduceOp order (checked above).
extern const KernelTable kScalarTable = {
    Isa::kScalar,
    {copy_load<Fp32Elem>, load_loop<Fp16Elem>, load_loop<Bf16Elem>, copy_load<Int32Elem>, copy_load<Fp64Elem>},
    {
        {accumulate_loop<Fp32Elem, OpSum>, accumulate_loop<Fp32Elem, OpMin>, accumulate_loop<Fp32Elem, OpMax>},
        {accumulate_loop<Fp16Elem, OpSum>, accumulate_loop<Fp16Elem, OpMin>, accumulate_loop<Fp16Elem, OpMax>},
        {accumulate_loop<Bf16Elem, OpSum>, accumulate_loop<Bf16Elem, OpMin>, accumulate_loop<Bf16Elem, OpMax>},
        {accumulate_loop<Int32Elem, OpSum>, accumulate_loop<Int32Elem, OpMin>, accumulate_loop<Int32Elem, OpMax>},
        {accumulate_loop<Fp64Elem, OpSum>, accumulate_loop<Fp64Elem, OpMin>, accumulate_loop<Fp64Elem, OpMax>},
    },
    {copy_finish<Fp32Elem>, finish_loop<Fp16Elem>, finish_loop<Bf16Elem>, copy_finish<Int32Elem>,
     copy_finish<Fp64Elem>},
};

}  // namespace internal
}  // namespace sumcast::kernels
